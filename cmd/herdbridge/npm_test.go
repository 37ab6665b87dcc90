package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// needNode returns node and npm for a third-party client test (what names
// it). Without them the test skips locally and fails in CI (CI set), so
// CI never silently skips one.
func needNode(t *testing.T, what string) (node, npm string) {
	t.Helper()
	node, errNode := exec.LookPath("node")
	npm, errNpm := exec.LookPath("npm")
	if errNode != nil || errNpm != nil {
		msg := "node and npm are needed for " + what + " (node: " + sdkErrString(errNode) + ", npm: " + sdkErrString(errNpm) + ")"
		if os.Getenv("CI") != "" {
			t.Fatal(msg + "; CI must run it: install Node 20+")
		}
		t.Skip(msg)
	}
	return node, npm
}

// npmTestdata returns testdata/name with node_modules holding the version
// of pkg its package.json pins: `npm ci` (with extra flags) only when it
// does not already, so a warm checkout (or a CI cache of node_modules or
// ~/.npm) costs nothing.
func npmTestdata(t *testing.T, npm, name, pkg string, extra ...string) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var manifest struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &manifest); err != nil {
		t.Fatalf("%s/package.json: %v", name, err)
	}
	want := manifest.Dependencies[pkg]
	var installed struct {
		Version string `json:"version"`
	}
	if raw, err := os.ReadFile(filepath.Join(dir, "node_modules", filepath.FromSlash(pkg), "package.json")); err == nil {
		_ = json.Unmarshal(raw, &installed)
	}
	if want != "" && installed.Version == want {
		return dir
	}
	t.Logf("npm ci in %s (installed %s %q, want %q)", dir, pkg, installed.Version, want)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, append([]string{"ci", "--no-audit", "--no-fund", "--prefer-offline"}, extra...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
	return dir
}
