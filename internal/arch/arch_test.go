// Package arch holds the architecture's rules as tests, so the layout the
// README's package map describes cannot drift unnoticed: which package may
// import which, where bbolt lives, how long a core function may grow.
package arch

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/herdbridge/herdbridge"

// goFile is one parsed non-test Go file of the module.
type goFile struct {
	path string // relative to the module root, with slashes
	fset *token.FileSet
	f    *ast.File
}

func (g goFile) dir() string { return filepath.ToSlash(filepath.Dir(g.path)) }

func (g goFile) imports() []string {
	var out []string
	for _, im := range g.f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		out = append(out, p)
	}
	return out
}

// sources parses every non-test Go file under the module root.
func sources(t *testing.T) []goFile {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var out []goFile
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, goFile{path: filepath.ToSlash(rel), fset: fset, f: f})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("no Go files found under the module root")
	}
	return out
}

// TestImportRules: nothing imports cmd; bbolt lives in the store and the
// embedded transport only; Prometheus in metrics/ only; the core imports none of its neighbours (they
// implement its interfaces, not the other way round).
func TestImportRules(t *testing.T) {
	// leaf is a package that imports nothing of this module but internal/fileedit
	leaf := []string{module + "/bridge", module + "/gateway", module + "/mcp", module + "/herdr", module + "/keys", module + "/opsui",
		module + "/clientsetup", module + "/userunit", module + "/cliout", module + "/demo", module + "/loadtest", module + "/metrics", module + "/sim"}
	forbidden := map[string][]string{ // importer dir prefix -> imports it must not have
		"bridge": {module + "/mcp", module + "/herdr", module + "/keys", module + "/gateway", module + "/cmd"},
		"herdr":  {module + "/mcp", module + "/gateway", module + "/keys"},
		"mcp":    {module + "/herdr", module + "/gateway", module + "/keys"},
		"keys":   {module + "/bridge", module + "/mcp", module + "/herdr", module + "/gateway"},
		"opsui":  {module + "/gateway", module + "/mcp", module + "/herdr", module + "/keys"},
		"sim":    {module + "/gateway", module + "/mcp", module + "/herdr"},
		// what the commands do besides parse flags (cmd/herdbridge is flags
		// → calls): client setup writes a person's config files, the user
		// unit and the file edit are leaves, the printed tables know the
		// gateway's answers but no transport, key or pane
		"clientsetup":        {module + "/herdr", module + "/keys", module + "/bridge", module + "/opsui"},
		"userunit":           leaf,
		"internal/fileedit":  leaf,
		"internal/buildinfo": leaf,
		"cliout":             {module + "/mcp", module + "/herdr", module + "/keys", module + "/opsui"},
		"demo":               {module + "/herdr", module + "/keys", module + "/opsui"},
	}
	for _, g := range sources(t) {
		for _, imp := range g.imports() {
			if strings.HasPrefix(imp, module+"/cmd") {
				t.Errorf("%s imports %s: nothing may import cmd", g.path, imp)
			}
			if strings.HasPrefix(imp, "go.etcd.io/bbolt") && g.dir() != "bridge/store" && g.dir() != "bridge/embedded" {
				t.Errorf("%s imports bbolt: only bridge/store and bridge/embedded may", g.path)
			}
			if strings.HasPrefix(imp, "github.com/prometheus/") && g.dir() != "metrics" && !strings.HasSuffix(g.path, "_test.go") {
				t.Errorf("%s imports %s: only metrics/ speaks Prometheus (the others keep plain counters it reads)", g.path, imp)
			}
			for prefix, bad := range forbidden {
				if g.dir() != prefix && !strings.HasPrefix(g.dir(), prefix+"/") {
					continue
				}
				for _, b := range bad {
					if (imp == b || strings.HasPrefix(imp, b+"/")) && !strings.HasSuffix(g.dir(), "test") {
						t.Errorf("%s imports %s: %s must not", g.path, imp, prefix)
					}
				}
			}
		}
	}
}

// leafPackages are the core's record packages: each keeps one kind of
// record on disk in its own types (the core converts to and from its own)
// and imports nothing of this module, so bridge may import them and none
// of them can import bridge back.
var leafPackages = []string{"bridge/store", "bridge/history", "bridge/audit"}

// TestLeafPackagesImportNothingOfTheModule: a record package that needs
// the core's vocabulary has grown past its room (convert in the core
// instead).
func TestLeafPackagesImportNothingOfTheModule(t *testing.T) {
	files := map[string]int{}
	for _, g := range sources(t) {
		for _, leaf := range leafPackages {
			if g.dir() != leaf {
				continue
			}
			files[leaf]++
			for _, imp := range g.imports() {
				if imp == module || strings.HasPrefix(imp, module+"/") {
					t.Errorf("%s imports %s: %s is a leaf and imports nothing of this module", g.path, imp, leaf)
				}
			}
		}
	}
	for _, leaf := range leafPackages {
		if files[leaf] == 0 {
			t.Errorf("no Go files in %s: a leaf package moved? update leafPackages", leaf)
		}
	}
}

// maxFuncLines bounds every function of bridge/ and its packages: a
// function that decides everything is split into an admit step and small
// handlers instead.
const maxFuncLines = 80

func TestCoreFunctionsStaySmall(t *testing.T) {
	checked := 0
	for _, g := range sources(t) {
		if g.dir() != "bridge" && !strings.HasPrefix(g.dir(), "bridge/") {
			continue
		}
		for _, d := range g.f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			checked++
			n := g.fset.Position(fd.End()).Line - g.fset.Position(fd.Pos()).Line + 1
			if n > maxFuncLines {
				t.Errorf("%s: %s is %d lines, over %d: split it", g.path, fd.Name.Name, n, maxFuncLines)
			}
		}
	}
	if checked < 100 {
		t.Fatalf("only %d functions checked under bridge/: the walk is broken", checked)
	}
}
