// Package buildinfo is the version and VCS revision a herdbridge binary
// was built from, as `herdbridge version` prints it and MCP clients see it.
package buildinfo

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// Info is what the Go toolchain recorded in the binary: the module
// version (v1.2.3 from `go install …@v1.2.3`, "(devel)" from a checkout)
// and, when built inside a git checkout, the VCS revision.
type Info struct {
	module, goVersion  string
	revision, revTime  string
	modified, haveInfo bool
}

// Read is this binary's build info; stamped is the git revision to use
// when the toolchain recorded none (main.revision, which `make build` sets).
func Read(stamped string) Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{module: "(devel)", revision: stamped}
	}
	b := Info{module: bi.Main.Version, goVersion: bi.GoVersion, haveInfo: true}
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
		b.revision = stamped
	}
	return b
}

// Short is the version MCP clients see in serverInfo: the module version,
// with the revision as build metadata when the binary has one
// (devel+d05d15a1c2e3, or devel+d05d15a1c2e3.dirty for uncommitted changes).
func (b Info) Short() string {
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

// Text is what `herdbridge version` and `--version` print.
func (b Info) Text() string {
	var s strings.Builder
	fmt.Fprintf(&s, "herdbridge %s\n", b.Short())
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
