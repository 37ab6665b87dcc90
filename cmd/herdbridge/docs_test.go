package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/herdbridge/herdbridge/internal/doccheck"
)

// docFiles are the documents a reader follows: the README, the reference
// pages (docs/notes/ is not among them: notes wait to be merged and may name
// what is not there yet) and the committed reports.
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no docs/*.md under %s (%v)", root, err)
	}
	files := []string{"README.md", "BENCHMARKS.md", "SOAK.md"}
	for _, p := range pages {
		files = append(files, filepath.ToSlash(strings.TrimPrefix(p, root+string(filepath.Separator))))
	}
	return files
}

// docProblems is everything in files (relative to root) a reader would trip
// over: a relative link or #anchor that does not resolve, a herdbridge
// command shown in a shell block that the real CLI would refuse to parse
// (unknown command or flag, bad value, stray argument), and a make target
// the Makefile does not have.
func docProblems(root string, files []string) []string {
	var out []string
	for _, p := range doccheck.CheckLinks(root, files) {
		out = append(out, p.String())
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		return append(out, err.Error())
	}
	targets := doccheck.MakeTargets(string(mk))
	for _, f := range files {
		text, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			out = append(out, err.Error())
			continue
		}
		cmds := append(doccheck.ShellCommands(string(text)), doccheck.InlineCommands(string(text), "make")...)
		for _, c := range cmds {
			if msg := commandProblem(c.Words, targets); msg != "" {
				out = append(out, fmt.Sprintf("%s:%d: %s", f, c.Line, msg))
			}
		}
		synopses, spans := mentions(string(text))
		for _, c := range synopses {
			for _, msg := range flagProblems(c.Words, true) {
				out = append(out, fmt.Sprintf("%s:%d: %s", f, c.Line, msg))
			}
		}
		for _, c := range spans {
			for _, msg := range flagProblems(c.Words, false) {
				out = append(out, fmt.Sprintf("%s:%d: %s", f, c.Line, msg))
			}
		}
	}
	return out
}

// commandProblem says what is wrong with one command shown, or "": a
// herdbridge command line (also as `go run ./cmd/herdbridge …`) must parse,
// and each target of a make command must exist.
func commandProblem(words []string, targets map[string]bool) string {
	switch {
	case len(words) >= 3 && words[0] == "go" && words[1] == "run" && strings.TrimPrefix(words[2], "./") == "cmd/herdbridge":
		words = append([]string{"herdbridge"}, words[3:]...)
	case len(words) > 0 && words[0] == "make":
		for _, w := range words[1:] {
			if !strings.HasPrefix(w, "-") && !strings.Contains(w, "=") && !targets[w] {
				return fmt.Sprintf("%q: the Makefile has no target %q", strings.Join(words, " "), w)
			}
		}
		return ""
	}
	if len(words) == 0 || words[0] != "herdbridge" {
		return ""
	}
	if err := parseOnly(words[1:]); err != nil {
		return fmt.Sprintf("%q does not parse: %v", strings.Join(words, " "), err)
	}
	return ""
}

// mentions are the herdbridge command lines a document names without
// meaning them to be typed as they are: synopsis lines in code blocks that
// are not shell ("herdbridge gateway [--listen ADDR] …"; shell lines are
// parsed in full instead), and code spans in prose.
func mentions(text string) (synopses, spans []doccheck.Command) {
	for _, l := range doccheck.Lines(text) {
		t := strings.TrimSpace(l.Text)
		if l.Fence && !doccheck.IsShell(l.Info) && strings.HasPrefix(t, "herdbridge ") {
			synopses = append(synopses, doccheck.Command{Line: l.N, Words: strings.Fields(t)})
		}
	}
	return synopses, doccheck.InlineCommands(text, "herdbridge")
}

var flagWord = regexp.MustCompile(`--[a-z][a-z0-9-]*`)

// flagProblems checks a mentioned command line loosely — placeholders,
// brackets and alternatives allowed — for one thing: the command it names
// has every --flag the line gives it (up to a "--", after which flags
// belong to another program, or a parenthesised remark). A synopsis must
// also name a command that exists; a span in prose may quote a word that
// is not one ("there is no `herdbridge send`").
func flagProblems(words []string, synopsis bool) []string {
	if len(words) == 0 || words[0] != "herdbridge" {
		return nil
	}
	var path []string
	for _, w := range words[1:] {
		if strings.HasPrefix(w, "-") || strings.ContainsAny(w, "[]|()<>…") || strings.ToUpper(w) == w {
			break
		}
		path = append(path, w)
	}
	root := newRoot(strings.NewReader(""), io.Discard, io.Discard)
	c, rest, err := root.Find(path)
	switch {
	case err != nil:
		return []string{fmt.Sprintf("%q: %v", strings.Join(words, " "), err)}
	case len(rest) > 0 && c.HasAvailableSubCommands() && synopsis:
		return []string{fmt.Sprintf("%q: unknown command %q for %q", strings.Join(words, " "), rest[0], c.CommandPath())}
	case len(rest) > 0 && c.HasAvailableSubCommands():
		return nil
	}
	c.InitDefaultHelpFlag()
	c.InitDefaultVersionFlag()
	var out []string
	for _, w := range words[1:] {
		if w == "--" || strings.HasPrefix(w, "(") {
			break
		}
		for _, fl := range flagWord.FindAllString(w, -1) {
			if c.Flags().Lookup(fl[2:]) == nil && c.InheritedFlags().Lookup(fl[2:]) == nil {
				out = append(out, fmt.Sprintf("%q: %s has no flag %s", strings.Join(words, " "), c.CommandPath(), fl))
			}
		}
	}
	return out
}

// TestDocsLinksAndCommands keeps what README.md and docs/ show valid: every
// relative link and anchor resolves, every herdbridge command shown parses
// with this CLI, every make target exists; and the README's own first test
// command is what CI (.ci/run) runs.
func TestDocsLinksAndCommands(t *testing.T) {
	root := filepath.Join("..", "..")
	files := docFiles(t, root)
	for _, p := range docProblems(root, files) {
		t.Error(p)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmds := doccheck.ShellCommands(string(readme))
	if len(cmds) < 2 || cmds[0].Line > 5 || cmds[1].Line > 5 {
		t.Fatalf("README.md must open with its two commands (start the product, run the tests): found %v", cmds)
	}
	test := strings.Join(cmds[1].Words, " ")
	ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	runs := false
	for _, c := range doccheck.SplitShellScript(string(ci)) {
		runs = runs || strings.Join(c, " ") == test
	}
	if !runs {
		t.Errorf(".ci/run does not run the README's test command %q", test)
	}
}

// TestDocProblemsFindsBadDocument is the checker on a tiny bad document:
// each kind of mistake is reported, and the same document corrected is
// clean.
func TestDocProblemsFindsBadDocument(t *testing.T) {
	bad := "# Doc\n\n## Start\n\nSee [start](#start), [gone](gone.md) and [start](#stat).\n\n" +
		"```sh\nherdbridge gateway --listen 127.0.0.1:0 --no-such-flag\nherdbridge gatway\n" +
		"herdbridge gateway --max-wait soon\nherdbridge roster extra-arg\nmake tset\n```\nRun `make bench`.\n" +
		"```\nherdbridge stats [--state-dir DIR] [--jsn]\nherdbridge gatway [--x]\n```\nOr `herdbridge dlq list --limt N`, not `herdbridge send`.\n"
	good := "# Doc\n\n## Start\n\nSee [start](#start).\n\n" +
		"```sh\nherdbridge gateway --listen 127.0.0.1:0 --max-wait 30s   # a comment\nherdbridge roster --json\n" +
		"herdbridge keys trust desktop 'ssh-ed25519 AAAA herdbridge@desktop'\nmake test\n```\nRun `make bench`.\n" +
		"```\nherdbridge stats [--state-dir DIR] [--json]\n```\nOr `herdbridge dlq list --limit N`, `herdbridge service install --user -- --broker URL`,\n" +
		"`herdbridge remove --name NAME`, `herdbridge version` (also `herdbridge --version`).\n"
	root := t.TempDir()
	mk := "build:\n\tgo build\ntest:\n\tgo test\nbench:\n\tgo test -bench .\n"
	for name, text := range map[string]string{"bad.md": bad, "good.md": good, "Makefile": mk} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := docProblems(root, []string{"good.md"}); len(got) != 0 {
		t.Fatalf("the good document has problems: %q", got)
	}
	got := strings.Join(docProblems(root, []string{"bad.md"}), "\n")
	for _, want := range []string{
		`bad.md:5: link "gone.md": gone.md does not exist`,
		`bad.md:5: link "#stat": bad.md has no heading with the anchor #stat`,
		`bad.md:8: "herdbridge gateway --listen 127.0.0.1:0 --no-such-flag" does not parse: unknown flag: --no-such-flag`,
		`bad.md:9: "herdbridge gatway" does not parse: unknown command "gatway"`,
		`bad.md:10: "herdbridge gateway --max-wait soon" does not parse: invalid argument "soon"`,
		`bad.md:11: "herdbridge roster extra-arg" does not parse: roster: unexpected argument "extra-arg"`,
		`bad.md:12: "make tset": the Makefile has no target "tset"`,
		`bad.md:16: "herdbridge stats [--state-dir DIR] [--jsn]": herdbridge stats has no flag --jsn`,
		`bad.md:17: "herdbridge gatway [--x]": unknown command "gatway" for "herdbridge"`,
		`bad.md:19: "herdbridge dlq list --limt N": herdbridge dlq list has no flag --limt`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing problem %s\nin:\n%s", want, got)
		}
	}
	if n := len(strings.Split(got, "\n")); n != 10 {
		t.Errorf("%d problems, want 10:\n%s", n, got)
	}
}

// TestParseOnly: the parser the docs test uses refuses what run refuses
// (exit 2) and runs nothing: a gateway command line that parses returns at
// once without listening.
func TestParseOnly(t *testing.T) {
	for _, ok := range [][]string{
		{"gateway", "--listen", "127.0.0.1:1", "--max-wait", "30s"},
		{"gateway", "--help"}, {"--help"}, {"--version"}, {"setup", "codex", "--print"},
		{"trace", "6e6f1969-8a5b-4908-9b9c-3a49294a48b7", "--wait", "5s"}, {"completion", "bash"},
		{"history", "purge", "--name", "w1"}, {"keys", "trust", "hostA", "ssh-ed25519 AAAA"},
	} {
		if err := parseOnly(ok); err != nil {
			t.Errorf("parseOnly(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range [][]string{
		{"gateway", "--no-such-flag"}, {"gatway"}, {"gateway", "--max-wait", "soon"},
		{"roster", "extra"}, {"setup", "emacs"}, {"trace"}, {"remove", "w1"},
	} {
		err := parseOnly(bad)
		if err == nil {
			t.Errorf("parseOnly(%q) = nil, want an error", bad)
			continue
		}
		var u *usageError
		if runErr := run(t.Context(), bad, strings.NewReader(""), io.Discard, io.Discard); !errors.As(runErr, &u) {
			t.Errorf("run(%q) = %v: not a usage error, yet parseOnly refused it (%v)", bad, runErr, err)
		}
	}
}

// synopses maps each top-level command to its lines of the synopsis block in
// docs/operations.md ("herdbridge gateway […]" and the "[…]" lines that
// continue it).
func synopses(text string) map[string]string {
	out := map[string]string{}
	cur := ""
	for _, l := range doccheck.Lines(text) {
		t := strings.TrimSpace(l.Text)
		switch {
		case !l.Fence || doccheck.IsShell(l.Info):
			cur = ""
		case strings.HasPrefix(t, "herdbridge "):
			cur = strings.Fields(t)[1]
			out[cur] += " " + t + " "
		case strings.HasPrefix(t, "[") && cur != "":
			out[cur] += " " + t + " "
		default:
			cur = ""
		}
	}
	return out
}

// synopsisGaps lists each command, subcommand and flag of the CLI that the
// synopsis block leaves out (cobra's completion command aside).
func synopsisGaps(text string) []string {
	syn := synopses(text)
	var out []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		words := strings.Fields(c.CommandPath())
		if len(words) > 1 && words[1] != "completion" {
			s := syn[words[1]]
			if s == "" {
				out = append(out, fmt.Sprintf("%s has no synopsis line", c.CommandPath()))
			} else if !strings.Contains(s, " "+strings.Join(words[1:], " ")+" ") && !strings.Contains(s, " "+c.Name()+" ") {
				out = append(out, fmt.Sprintf("the synopsis of %s does not name %s", words[1], c.CommandPath()))
			}
			c.LocalFlags().VisitAll(func(f *pflag.Flag) {
				if !f.Hidden && !regexp.MustCompile(`--`+regexp.QuoteMeta(f.Name)+`([ =\]]|$)`).MatchString(s) {
					out = append(out, fmt.Sprintf("the synopsis of %s lacks --%s (%s)", c.CommandPath(), f.Name, f.Usage))
				}
			})
		}
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() {
				walk(sub)
			}
		}
	}
	walk(newRoot(strings.NewReader(""), io.Discard, io.Discard))
	return out
}

// TestCommandsSynopsisComplete: docs/operations.md's synopsis block names
// every command and every flag the CLI has, so a new flag is documented
// where a reader looks for it (TestDocsLinksAndCommands checks the other
// way: every flag it names exists).
func TestCommandsSynopsisComplete(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range synopsisGaps(string(text)) {
		t.Error(g)
	}
	// and the check itself: a synopsis missing a flag and a command is caught
	gaps := strings.Join(synopsisGaps("```\nherdbridge roster   [--state-dir DIR]\n```\n"), "\n")
	for _, want := range []string{"the synopsis of herdbridge roster lacks --json", "herdbridge gateway has no synopsis line"} {
		if !strings.Contains(gaps, want) {
			t.Errorf("synopsisGaps missed %q in:\n%s", want, gaps)
		}
	}
}
