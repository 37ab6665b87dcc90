package main

import (
	"io"
	"strings"
)

// parseOnly parses a command line as run would — which command, its flags
// and their values, its positional arguments — and runs nothing. The docs
// test hands it every herdbridge command README.md and docs/ show, so an
// example with a renamed or mistyped flag fails the build.
func parseOnly(args []string) error {
	root := newRoot(strings.NewReader(""), io.Discard, io.Discard)
	c, rest, err := root.Find(args)
	if err != nil {
		return err
	}
	c.InitDefaultHelpFlag() // Execute adds --help and --version; Find alone does not
	c.InitDefaultVersionFlag()
	if err := c.ParseFlags(rest); err != nil {
		return err
	}
	if help, _ := c.Flags().GetBool("help"); help {
		return nil
	}
	return c.ValidateArgs(c.Flags().Args())
}
