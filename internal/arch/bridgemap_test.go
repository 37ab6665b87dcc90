package arch

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// bridgeDoc is the package doc of bridge/: its map and its lock order.
const bridgeDoc = "../../bridge/doc.go"

// goName is a file name as the map writes it: entstate.go, or a glob such
// as history*.go for a family of files.
var goName = regexp.MustCompile(`\b[a-z0-9_]+\*?\.go\b`)

// TestBridgeMapNamesEveryFile: bridge/doc.go's map names every non-test
// file of package bridge (by its name or by a glob), and every file it
// names exists, so a file added, renamed or removed without its row in the
// map fails here instead of sending the next reader back to grep.
func TestBridgeMapNamesEveryFile(t *testing.T) {
	doc, err := os.ReadFile(bridgeDoc)
	if err != nil {
		t.Fatal(err)
	}
	named := goName.FindAllString(string(doc), -1)
	files, err := filepath.Glob("../../bridge/*.go")
	if err != nil || len(files) < 50 {
		t.Fatalf("bridge/*.go: %d files, %v: the glob is broken", len(files), err)
	}
	exists := map[string]bool{}
	for _, f := range files {
		base := filepath.Base(f)
		exists[base] = true
		if strings.HasSuffix(base, "_test.go") {
			continue
		}
		if !mapNames(named, base) {
			t.Errorf("bridge/%s is in no row of bridge/doc.go's map: add it to the row of the noun it holds", base)
		}
	}
	for _, n := range named {
		if !strings.Contains(n, "*") && !exists[n] {
			t.Errorf("bridge/doc.go's map names %s, which bridge/ does not have: a renamed or removed file", n)
		}
	}
}

// mapNames reports whether one of the map's names is base, or a glob that
// matches it.
func mapNames(named []string, base string) bool {
	for _, n := range named {
		if ok, _ := filepath.Match(n, base); ok {
			return true
		}
	}
	return false
}

// TestLockOrderHasOneCopy: the lock order is written once, in
// bridge/doc.go; any other Go file that spells the order out (rather than
// pointing to doc.go) is a second copy that will drift.
func TestLockOrderHasOneCopy(t *testing.T) {
	doc, err := os.ReadFile(bridgeDoc)
	if err != nil {
		t.Fatal(err)
	}
	const order = "regMu → presence.pub →"
	if !strings.Contains(string(doc), order) {
		t.Fatalf("bridge/doc.go does not state the lock order (%q)", order)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	docAbs, _ := filepath.Abs(bridgeDoc)
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || p == docAbs || strings.HasSuffix(p, "bridgemap_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), order) {
			rel, _ := filepath.Rel(root, p)
			t.Errorf("%s restates the lock order: point to bridge/doc.go instead", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
