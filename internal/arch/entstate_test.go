package arch

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"strings"
	"testing"
)

// TestEntStatePartsOwnTheirFields: the per-entity record (bridge's
// entState) is made of parts, each a small type whose methods keep its
// invariants. A field of entState or of one of its parts is written —
// assigned, incremented, indexed into, deleted from — only in the file
// that declares the type it belongs to (the entity's own fields, through
// entState, in entState's file). Any other file calls the part's methods.
// Reads are free.
func TestEntStatePartsOwnTheirFields(t *testing.T) {
	fset, files, info, pkg := typeCheckBridge(t)
	ent, ok := pkg.Scope().Lookup("entState").(*types.TypeName)
	if !ok {
		t.Fatal("bridge has no entState type: update this test")
	}
	parts := entStateParts(ent)
	if len(parts) < 5 {
		t.Fatalf("entState has %d parts: the walk is broken", len(parts))
	}
	checked := 0
	for _, f := range files {
		file := filepath.Base(fset.Position(f.Pos()).Filename)
		forEachWrite(f, func(lhs ast.Expr) {
			owner, field := writeOwner(info, parts, lhs)
			if owner == nil {
				return
			}
			checked++
			if want := filepath.Base(fset.Position(owner.Pos()).Filename); want != file {
				t.Errorf("%s: writes %s.%s directly: only %s may (call a method of %s)", fset.Position(lhs.Pos()), owner.Name(), field, want, owner.Name())
			}
		})
	}
	if checked < 20 {
		t.Fatalf("only %d writes of entState's parts found: the walk is broken", checked)
	}
}

// typeCheckBridge type-checks the non-test files of package bridge.
func typeCheckBridge(t *testing.T) (*token.FileSet, []*ast.File, *types.Info, *types.Package) {
	t.Helper()
	fset := token.NewFileSet()
	paths, err := filepath.Glob("../../bridge/*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	info := &types.Info{Selections: map[*ast.SelectorExpr]*types.Selection{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	pkg, err := conf.Check(module+"/bridge", fset, files, info)
	if err != nil {
		t.Fatalf("type-checking bridge: %v", err)
	}
	return fset, files, info, pkg
}

// entStateParts is entState and the types of its embedded struct fields
// declared in bridge (Entity, shared with the whole module, is not a part:
// its fields are owned by entState's file).
func entStateParts(ent *types.TypeName) map[*types.TypeName]bool {
	parts := map[*types.TypeName]bool{ent: true}
	st := ent.Type().Underlying().(*types.Struct)
	for i := range st.NumFields() {
		f := st.Field(i)
		n, ok := f.Type().(*types.Named)
		if !f.Embedded() || !ok || n.Obj().Name() == "Entity" || n.Obj().Pkg() != ent.Pkg() {
			continue
		}
		parts[n.Obj()] = true
	}
	return parts
}

// forEachWrite calls fn with every expression f writes to: the left side
// of an assignment, the operand of ++ and --, the map of delete and clear.
func forEachWrite(f *ast.File, fn func(ast.Expr)) {
	ast.Inspect(f, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.AssignStmt:
			if x.Tok != token.DEFINE {
				for _, l := range x.Lhs {
					fn(l)
				}
			}
		case *ast.IncDecStmt:
			fn(x.X)
		case *ast.CallExpr:
			if id, ok := x.Fun.(*ast.Ident); ok && (id.Name == "delete" || id.Name == "clear") && len(x.Args) > 0 {
				fn(x.Args[0])
			}
		}
		return true
	})
}

// writeOwner finds, in the written expression e (st.f, st.f[k], st.f.g …),
// the outermost field of entState or one of its parts, and returns the
// part that owns it: the last part its selection path passes through.
func writeOwner(info *types.Info, parts map[*types.TypeName]bool, e ast.Expr) (*types.TypeName, string) {
	for {
		switch x := e.(type) {
		case *ast.ParenExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.StarExpr:
			e = x.X
		case *ast.SelectorExpr:
			if sel, ok := info.Selections[x]; ok && sel.Kind() == types.FieldVal {
				if owner := pathOwner(parts, sel); owner != nil {
					return owner, x.Sel.Name
				}
			}
			e = x.X
		default:
			return nil, ""
		}
	}
}

// pathOwner walks sel's path from its receiver: the last part it meets,
// nil when the receiver is not a part.
func pathOwner(parts map[*types.TypeName]bool, sel *types.Selection) *types.TypeName {
	typ := sel.Recv()
	var owner *types.TypeName
	for _, i := range sel.Index() {
		if p, ok := typ.(*types.Pointer); ok {
			typ = p.Elem()
		}
		n, ok := typ.(*types.Named)
		if !ok {
			return owner
		}
		if parts[n.Obj()] {
			owner = n.Obj()
		} else if owner == nil {
			return nil
		}
		st, ok := n.Underlying().(*types.Struct)
		if !ok {
			return owner
		}
		typ = st.Field(i).Type()
	}
	return owner
}
