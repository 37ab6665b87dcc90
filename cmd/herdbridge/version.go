package main

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// buildInfo is what the Go toolchain recorded in the binary: the module
// version (v1.2.3 from `go install …@v1.2.3`, "(devel)" from a checkout)
// and, when built inside a git checkout, the VCS revision.
type buildInfo struct {
	module, goVersion  string
	revision, revTime  string
	modified, haveInfo bool
}

// revision is the git revision when the toolchain could not stamp one:
// `make build` sets it (-ldflags "-X main.revision=…"), since go build
// records none in a git worktree or with -buildvcs=false.
var revision string

func readBuild() buildInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return buildInfo{module: "(devel)", revision: revision}
	}
	b := buildInfo{module: bi.Main.Version, goVersion: bi.GoVersion, haveInfo: true}
	if b.module == "" {
		b.module = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.revision = s.Value
		case "vcs.time":
			b.revTime = s.Value
		case "vcs.modified":
			b.modified = s.Value == "true"
		}
	}
	if b.revision == "" {
		b.revision = revision
	}
	return b
}

// serverVersion is the version MCP clients see in serverInfo: the module
// version, with the revision as build metadata when the binary has one
// (devel+d05d15a1c2e3, or devel+d05d15a1c2e3.dirty for uncommitted changes).
func serverVersion() string { return readBuild().short() }

func (b buildInfo) short() string {
	v := b.module
	if v == "(devel)" {
		v = "devel"
	}
	if b.revision == "" || strings.Contains(v, shortRev(b.revision)) { // a pseudo-version names it already
		return v
	}
	v += "+" + shortRev(b.revision)
	if b.modified {
		v += ".dirty"
	}
	return v
}

func shortRev(r string) string { return r[:min(12, len(r))] }

// versionText is what `herdbridge version` and `--version` print.
func versionText() string {
	b := readBuild()
	var s strings.Builder
	fmt.Fprintf(&s, "herdbridge %s\n", b.short())
	fmt.Fprintf(&s, "module   github.com/herdbridge/herdbridge %s\n", b.module)
	if b.revision != "" {
		extra := b.revTime
		if b.modified {
			extra += ", with uncommitted changes"
		}
		if extra = strings.TrimPrefix(extra, ", "); extra != "" {
			extra = " (" + extra + ")"
		}
		fmt.Fprintf(&s, "revision %s%s\n", b.revision, extra)
	} else {
		why := "built from a module version, not a git checkout"
		if b.module == "(devel)" {
			why = "go build records none in a git worktree or with -buildvcs=false; make build stamps it"
		}
		fmt.Fprintf(&s, "revision unknown (%s)\n", why)
	}
	if b.goVersion != "" {
		fmt.Fprintf(&s, "go       %s\n", b.goVersion)
	}
	return s.String()
}

func versionCommand(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the version and VCS revision this binary was built from",
		Example: "  herdbridge version\n  herdbridge --version",
		Args:    noArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := io.WriteString(stdout, versionText())
			return err
		},
	}
}
