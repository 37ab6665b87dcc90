package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/spf13/cobra"

	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// cli runs one command line in-process.
func cli(args ...string) (stdout, stderr string, err error) {
	var out, errb bytes.Buffer
	err = run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), err
}

// commandPaths is every command of the CLI, as argument lists.
func commandPaths(c *cobra.Command, prefix []string) [][]string {
	var paths [][]string
	for _, s := range c.Commands() {
		if s.Hidden || s.Name() == "help" {
			continue
		}
		p := append(append([]string{}, prefix...), s.Name())
		paths = append(paths, p)
		paths = append(paths, commandPaths(s, p)...)
	}
	return paths
}

// TestHelpEveryCommand: --help and -h of the root and of every subcommand
// succeed (exit 0) and print the usage and an example, on stdout.
func TestHelpEveryCommand(t *testing.T) {
	paths := append([][]string{{}}, commandPaths(newRoot(nil, nil, nil), nil)...)
	if len(paths) < 15 {
		t.Fatalf("only %d commands found: %v", len(paths), paths)
	}
	for _, p := range paths {
		for _, h := range []string{"--help", "-h"} {
			out, _, err := cli(append(p, h)...)
			if err != nil {
				t.Errorf("herdbridge %s %s: %v", strings.Join(p, " "), h, err)
				continue
			}
			if !strings.Contains(out, "Usage:") {
				t.Errorf("herdbridge %s %s: no usage in %q", strings.Join(p, " "), h, out)
			}
			// cobra's own completion commands explain themselves in prose
			if (len(p) == 0 || p[0] != "completion") && !strings.Contains(out, "Examples:\n  herdbridge ") {
				t.Errorf("herdbridge %s %s: no example:\n%s", strings.Join(p, " "), h, out)
			}
		}
	}
	t.Logf("%d commands, each with usage and an example", len(paths))
}

// TestUsageErrors: a command line that does not parse is a *usageError
// (exit 2, with the usage line); a failure of the command itself is not.
func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{}, {"frobnicate"}, {"roster", "--bogus"}, {"roster", "extra"}, {"gateway", "--fsync=maybe"},
		{"dlq"}, {"dlq", "list", "--limit", "x"}, {"version", "x"}, {"keys", "--bogus"},
	} {
		_, _, err := cli(args...)
		var u *usageError
		if !errors.As(err, &u) {
			t.Errorf("herdbridge %q: %v, want a usage error", args, err)
		} else if !strings.HasPrefix(u.line, "herdbridge") {
			t.Errorf("herdbridge %q: usage line %q", args, u.line)
		}
	}
	_, _, err := cli("roster", "--state-dir", t.TempDir())
	var u *usageError
	if err == nil || errors.As(err, &u) {
		t.Errorf("roster without a gateway: %v, want a plain error", err)
	}
}

// TestExitStatus runs the built binary: --help exits 0, a bad flag 2 with
// the usage line on stderr, a failing command 1.
func TestExitStatus(t *testing.T) {
	bin := buildBinary(t)
	for _, c := range []struct {
		args   []string
		status int
		stderr string
	}{
		{[]string{"--help"}, 0, ""},
		{[]string{"mcp", "-h"}, 0, ""},
		{[]string{"roster", "--bogus"}, 2, "usage: herdbridge roster"},
		{[]string{"nope"}, 2, "usage: herdbridge"},
		{[]string{"roster", "--state-dir", t.TempDir()}, 1, "herdbridge: "},
	} {
		cmd := exec.Command(bin, c.args...)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		err := cmd.Run()
		status := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			status = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if status != c.status || !strings.Contains(errb.String(), c.stderr) {
			t.Errorf("herdbridge %q: exit %d, stderr %q; want %d and %q", c.args, status, errb.String(), c.status, c.stderr)
		}
	}
}

var (
	versionRe = regexp.MustCompile(`^herdbridge (\S+)\nmodule   github\.com/herdbridge/herdbridge \S+\nrevision (unknown \([^)]+\)|[0-9a-f]{40}( \(.*\))?)\n(go       go\S+\n)?$`)
	shortRe   = regexp.MustCompile(`^(devel|v\d+\.\d+\.\d+\S*)(\+[0-9a-f]{12}(\.dirty)?)?$`)
)

// TestVersion: `version` and `--version` print the same text, in the
// expected shape (a test binary may have no VCS stamp: only the format is
// checked here; TestVersionBinary checks the real revision).
func TestVersion(t *testing.T) {
	out, _, err := cli("version")
	if err != nil {
		t.Fatal(err)
	}
	if !versionRe.MatchString(out) {
		t.Fatalf("version printed %q", out)
	}
	if v, _, _ := cli("--version"); v != out {
		t.Errorf("--version printed %q, version %q", v, out)
	}
	if s := serverVersion(); !shortRe.MatchString(s) {
		t.Errorf("serverVersion %q", s)
	}
}

// TestVersionBinary: the built binary prints the checkout's revision, and
// a gateway it runs reports the same version as MCP serverInfo.
func TestVersionBinary(t *testing.T) {
	rev, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	bin := buildBinary(t)
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !versionRe.MatchString(string(out)) || !strings.Contains(string(out), "revision "+strings.TrimSpace(string(rev))) {
		t.Fatalf("version printed %q, want revision %s", out, rev)
	}
	short := strings.TrimPrefix(strings.SplitN(string(out), "\n", 2)[0], "herdbridge ")
	if !strings.Contains(short, string(rev[:12])) {
		t.Errorf("short version %q lacks the revision", short)
	}

	dir := gatewaytest.TempDir(t)
	gp := startGatewayProcArgs(t, bin, dir, "versionhost")
	c, _, r, err := gateway.Dial(gp.dir, gateway.Request{Op: "register", Name: "v", Role: "primary"})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	hc, err := client.NewStreamableHttpClient(r.URL+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + r.Token}))
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	ctx := context.Background()
	if err := hc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	req := mcpgo.InitializeRequest{}
	req.Params.ProtocolVersion = mcpgo.LATEST_PROTOCOL_VERSION
	req.Params.ClientInfo = mcpgo.Implementation{Name: "version-test", Version: "1"}
	res, err := hc.Initialize(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.ServerInfo.Name != "herdbridge" || res.ServerInfo.Version != short {
		t.Errorf("serverInfo %+v, want herdbridge %s", res.ServerInfo, short)
	}
}

// TestCompletion: the completion scripts load: bash parses and registers
// the completion; zsh and fish are checked by their shells when installed.
// The dynamic completions a script asks for name the commands and values.
func TestCompletion(t *testing.T) {
	dir := t.TempDir()
	for _, sh := range []struct{ name, marker string }{
		{"bash", "complete -o default -F __start_herdbridge herdbridge"},
		{"zsh", "#compdef herdbridge"},
		{"fish", "complete -c herdbridge"},
	} {
		out, _, err := cli("completion", sh.name)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, sh.marker) {
			t.Errorf("%s completion lacks %q", sh.name, sh.marker)
		}
		path := filepath.Join(dir, "herdbridge."+sh.name)
		if err := os.WriteFile(path, []byte(out), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := exec.LookPath(sh.name); err != nil {
			t.Logf("%s is not installed: its script was checked for %q only", sh.name, sh.marker)
			continue
		}
		check := []string{"-n", path}
		if sh.name == "bash" { // parse, then load and see the completion registered
			check = []string{"--norc", "--noprofile", "-c", "set -e; bash -n " + path + "; source " + path + "; complete -p herdbridge"}
		}
		if o, err := exec.Command(sh.name, check...).CombinedOutput(); err != nil {
			t.Errorf("%s does not load its completion: %v\n%s", sh.name, err, o)
		}
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", ""}, []string{"gateway", "keys", "mcp", "version", "completion"}},
		{[]string{"__complete", "mcp", "--role", ""}, []string{"primary", "worker", "orchestrator"}},
		{[]string{"__complete", "keys", ""}, []string{"init", "show", "trust", "revoke", "rotate"}},
		{[]string{"__complete", "gateway", "--"}, []string{"--broker", "--state-dir", "--fsync"}},
	} {
		out, _, err := cli(c.args...)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%q completes to %q, without %q", c.args, out, w)
			}
		}
	}
}

// TestFlagsFromEnv: HERDBRIDGE_<FLAG> sets any flag the command line does
// not; the command line wins; --group comes from HERDBRIDGE_GROUPS; a bad
// value is a usage error naming the variable.
func TestFlagsFromEnv(t *testing.T) {
	envDir, flagDir := t.TempDir(), t.TempDir()
	t.Setenv("HERDBRIDGE_STATE_DIR", envDir)
	t.Setenv("HERDBRIDGE_HOST_ID", "envhost")
	if _, _, err := cli("keys", "init"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cli("keys", "init", "--state-dir", flagDir, "--host-id", "flaghost"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HERDBRIDGE_ALL", "true")
	for dir, host := range map[string]string{envDir: "envhost", flagDir: "flaghost"} {
		args := []string{"keys", "show"}
		if dir == flagDir {
			args = append(args, "--state-dir", flagDir)
		}
		out, _, err := cli(args...)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "@"+host+"\n") || !strings.Contains(out, "fingerprint ") || !strings.Contains(out, dir) {
			t.Errorf("keys show %q (key of %s, --all from HERDBRIDGE_ALL):\n%s", args, host, out)
		}
	}

	var groups []string
	c := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }}
	c.Flags().StringArrayVar(&groups, "group", nil, "")
	t.Setenv("HERDBRIDGE_GROUPS", "build, review")
	if err := flagsFromEnv(c); err != nil || strings.Join(groups, "|") != "build|review" {
		t.Errorf("HERDBRIDGE_GROUPS: %q, %v", groups, err)
	}

	t.Setenv("HERDBRIDGE_FSYNC", "maybe")
	_, _, err := cli("gateway", "--state-dir", t.TempDir())
	var u *usageError
	if !errors.As(err, &u) || !strings.Contains(err.Error(), "HERDBRIDGE_FSYNC") {
		t.Errorf("HERDBRIDGE_FSYNC=maybe: %v", err)
	}
	for flag, env := range map[string]string{"state-dir": "HERDBRIDGE_STATE_DIR", "host-id": "HERDBRIDGE_HOST_ID", "name": "HERDBRIDGE_NAME", "group": "HERDBRIDGE_GROUPS"} {
		if got := envName(flag); got != env {
			t.Errorf("envName(%q) = %q, want %q", flag, got, env)
		}
	}
}

// TestMCPNameFromHerdrBeforeDefault: a `.mcp.json` written by setup with
// --default-name is shared by every pane of a repository; inside a herdr
// pane the name derived from the pane wins, so two panes never merge.
func TestMCPNameFromHerdrBeforeDefault(t *testing.T) {
	dir := gatewaytest.TempDir(t)
	g := gatewaytest.StartLocal(t, dir)
	t.Setenv("HERDR_ENV", "1")
	t.Setenv("HERDR_PANE_ID", "p7")
	t.Setenv("HERDR_SOCKET_PATH", filepath.Join(t.TempDir(), "no-herdr.sock")) // no agent name: <cwd>-<pane>
	var out, errb bytes.Buffer
	err := run(t.Context(), []string{"mcp", "--state-dir", dir, "--default-name", "shared", "--default-role", "worker"}, strings.NewReader(""), &out, &errb)
	if err != nil {
		t.Fatalf("mcp: %v\n%s", err, errb.String())
	}
	cwd, _ := os.Getwd()
	want := gateway.DeriveName("", cwd, "p7")
	if _, err := g.Core().Resolve(want); err != nil {
		t.Fatalf("the pane's name %q was not registered: %v", want, err)
	}
	if _, err := g.Core().Resolve("shared"); err == nil {
		t.Fatal("--default-name was used inside a herdr pane: every pane sharing the config would merge into one entity")
	}
}
