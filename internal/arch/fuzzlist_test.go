package arch

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	fuzzFunc = regexp.MustCompile(`(?m)^func (Fuzz\w+)\(`)
	fuzzLine = regexp.MustCompile(`-fuzz '\^(Fuzz\w+)\$\$' .* \./([\w/.-]*?)/?\s*$`)
)

// TestMakeFuzzRunsEveryTarget: `make fuzz` names every fuzz target where
// it lives, and nothing else. A target moved to another package (history's
// parser went to bridge/history) left `make fuzz` fuzzing a name that no
// longer exists — go test then fuzzes nothing and passes — and seven
// targets had never been listed.
func TestMakeFuzzRunsEveryTarget(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	have := fuzzTargets(t, root)
	listed := makeFuzzTargets(t, filepath.Join(root, "Makefile"))
	for k := range have {
		if !listed[k] {
			t.Errorf("fuzz target %s is not in the Makefile's fuzz target: add it", k)
		}
	}
	for k := range listed {
		if !have[k] {
			t.Errorf("the Makefile's fuzz target names %s, which does not exist (moved or renamed?)", k)
		}
	}
}

// fuzzTargets is every "Name ./pkg" fuzz function of the module's tests.
func fuzzTargets(t *testing.T, root string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		for _, m := range fuzzFunc.FindAllSubmatch(src, -1) {
			out[string(m[1])+" ./"+filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// makeFuzzTargets is every "Name ./pkg" the Makefile's fuzz lines run.
func makeFuzzTargets(t *testing.T, makefile string) map[string]bool {
	t.Helper()
	src, err := os.ReadFile(makefile)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(src), "\n") {
		if m := fuzzLine.FindStringSubmatch(line); m != nil {
			out[m[1]+" ./"+m[2]] = true
		}
	}
	if len(out) == 0 {
		t.Fatal("no fuzz lines found in the Makefile: has its form changed?")
	}
	return out
}
