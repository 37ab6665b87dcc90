package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/herdbridge/herdbridge/demo"
)

func demoCommand(stdout io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:   "demo",
		Short: "Run a full exchange with real MCP clients and print the transcript",
		Long: `Run a full exchange against the gateway on --state-dir if one runs there, else against
one started in-process on a temporary directory, with real MCP clients over streamable
HTTP, stdio and SSE, and print the transcript. It exits non-zero if any step returns an
unexpected status.`,
		Example: "  herdbridge demo\n  herdbridge demo --state-dir /nonexistent   # always a fresh in-process gateway",
		Args:    noArgs,
	}
	_, dir := newFlags(c)
	c.RunE = func(c *cobra.Command, _ []string) error { return demo.Run(c.Context(), *dir, stdout) }
	return c
}
