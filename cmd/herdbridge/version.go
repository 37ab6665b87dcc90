package main

import (
	"io"

	"github.com/herdbridge/herdbridge/internal/buildinfo"

	"github.com/spf13/cobra"
)

// revision is the git revision when the toolchain could not stamp one:
// `make build` sets it (-ldflags "-X main.revision=…"), since go build
// records none in a git worktree or with -buildvcs=false.
var revision string

// serverVersion is the version MCP clients see in serverInfo.
func serverVersion() string { return buildinfo.Read(revision).Short() }

// versionText is what `herdbridge version` and `--version` print.
func versionText() string { return buildinfo.Read(revision).Text() }

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
