package doccheck

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestSlugLikeGitHub: the anchors GitHub gives this project's own headings
// (checked against the rendered README on github.com for the punctuated ones).
func TestSlugLikeGitHub(t *testing.T) {
	for heading, want := range map[string]string{
		"Run the gateway as a service (systemd)":            "run-the-gateway-as-a-service-systemd",
		"bridge.delay (optional)":                           "bridgedelay-optional",
		"mcp-go traps":                                      "mcp-go-traps",
		"Across hosts (RabbitMQ / LavinMQ)":                 "across-hosts-rabbitmq--lavinmq",
		"What a receiving gateway checks, in this order":    "what-a-receiving-gateway-checks-in-this-order",
		"Connect two hosts, step by step":                   "connect-two-hosts-step-by-step",
		"`bridge_send` and [the path](x.md)":                "bridge_send-and-the-path",
		"Ünïcode stays, émoji 🚀 goes":                       "ünïcode-stays-émoji--goes",
		"Quick start (one host)":                            "quick-start-one-host",
		"Who may brief whom (role policy)":                  "who-may-brief-whom-role-policy",
		"Limits and defaults":                               "limits-and-defaults",
		"Across hosts in five steps":                        "across-hosts-in-five-steps",
		"herdbridge — message fabric":                       "herdbridge--message-fabric",
		"A heading with a closing sequence":                 "a-heading-with-a-closing-sequence",
		"Trailing spaces are trimmed   ":                    "trailing-spaces-are-trimmed",
		"under_scores_stay":                                 "under_scores_stay",
		"Numbers 1, 2 and 10 000":                           "numbers-1-2-and-10-000",
		"Sealed bodies":                                     "sealed-bodies",
		"The path of one `bridge_send`, from the tool call": "the-path-of-one-bridge_send-from-the-tool-call",
	} {
		if got := Slug(heading); got != want {
			t.Errorf("Slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

func TestAnchorsNumberRepeatsAndSkipCode(t *testing.T) {
	doc := "# Title\n## Codex\ntext\n## Codex\n```sh\n# not a heading\n```\n### Codex ###\n"
	got := Anchors(doc)
	want := map[string]bool{"title": true, "codex": true, "codex-1": true, "codex-2": true}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Anchors = %v, want %v", got, want)
	}
}

// TestCheckLinksFindsBrokenOnes is the checker on a tiny bad document: a
// missing file, a missing anchor in another page, a missing anchor in the
// page itself; and the good links beside them pass.
func TestCheckLinksFindsBrokenOnes(t *testing.T) {
	root := t.TempDir()
	write(t, root, "docs/a.md", "# A\n\n## Part one\n\nSee [b](b.md#part-two), [self](#part-one), [img](pic.png),\n"+
		"[dir](../sub/), [web](https://example.com/x#y), [up](../README.md).\n"+
		"Bad: [gone](missing.md), [no anchor](b.md#part-three), [no self](#nowhere).\n"+
		"`[in code](nothere.md)` is not a link.\n\n```md\n[in a block](nothere.md)\n```\n")
	write(t, root, "docs/b.md", "# B\n\n## Part two\n")
	write(t, root, "docs/pic.png", "png")
	write(t, root, "sub/x", "")
	write(t, root, "README.md", "# R\n[out](../../etc/passwd)\n")
	got := CheckLinks(root, []string{"docs/a.md", "docs/b.md", "README.md"})
	var msgs []string
	for _, p := range got {
		msgs = append(msgs, p.String())
	}
	want := []string{
		`docs/a.md:7: link "missing.md": docs/missing.md does not exist`,
		`docs/a.md:7: link "b.md#part-three": docs/b.md has no heading with the anchor #part-three`,
		`docs/a.md:7: link "#nowhere": docs/a.md has no heading with the anchor #nowhere`,
		`README.md:2: link "../../etc/passwd" leaves the repository`,
	}
	if !reflect.DeepEqual(msgs, want) {
		t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(msgs, "\n"), strings.Join(want, "\n"))
	}
}

func TestShellCommands(t *testing.T) {
	doc := "# T\n\n    go run ./cmd/x gateway     # start it\n    make test\n\n" +
		"1. a list item\n\n    continued, not code\n\n" +
		"```sh\nherdbridge gateway --broker 'amqp://u@h/' \\\n  --host-id a   # a comment\n" +
		"# only a comment\nsource <(herdbridge completion bash) && HB=1 make soak SOAK=30m 2>&1 | tee log\n" +
		"echo $(herdbridge version) > out.txt\n```\n" +
		"```console\n$ herdbridge doctor\nok    gateway  answering\n```\n" +
		"```text\n$ herdbridge stats --json\nherdbridge gateway [--listen ADDR]\n```\n" +
		"```json\n{\"args\": [\"herdbridge\"]}\n```\n"
	var got []string
	for _, c := range ShellCommands(doc) {
		got = append(got, strings.Join(c.Words, " "))
	}
	want := []string{
		"go run ./cmd/x gateway", "make test",
		"herdbridge gateway --broker amqp://u@h/ --host-id a",
		"source", "herdbridge completion bash", "make soak SOAK=30m", "tee log",
		"echo", "herdbridge version",
		"herdbridge doctor", "herdbridge stats --json",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("commands:\n%q\nwant:\n%q", got, want)
	}
}

func TestInlineCommandsAndMakeTargets(t *testing.T) {
	doc := "Run `make bench` (or `. .ci/rmq.sh && make test`), not `makefile` or `herdbridge x`.\n```sh\nmake nothere\n```\n"
	var got []string
	for _, c := range InlineCommands(doc, "make") {
		got = append(got, strings.Join(c.Words, " "))
	}
	if want := []string{"make bench", "make test"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("inline = %q, want %q", got, want)
	}
	mk := "GO ?= go\nX := 1\n.PHONY: build test\nbuild:\n\tgo build\ntest: vet\n\tgo test\nsoak bench: x\n# c:\n"
	want := map[string]bool{"build": true, "test": true, "soak": true, "bench": true}
	if got := MakeTargets(mk); !reflect.DeepEqual(got, want) {
		t.Fatalf("targets = %v, want %v", got, want)
	}
}

func write(t *testing.T, root, name, text string) {
	t.Helper()
	p := filepath.Join(root, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
