package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/opsui"
)

func uiCommand(stdout, stderr io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:   "ui [--print]",
		Short: "Open the gateway's live operator page (hosts, entities, traffic, dead letters) in a browser",
		Long: `Open the gateway's live operator page in a browser, through a one-time login link
that the gateway mints over its admin socket. The link works once, for ` + opsui.CodeTTL.String() + `;
the browser keeps an operator session cookie, and the address bar keeps no secret.
The browser is $BROWSER if set, else xdg-open (open on macOS); it is handed the
file:// URL of a page readable by this user only (in the state dir) that opens the
link, so the secret is never on a command line, where other users could read it.
Where no browser works (no display, an SSH session) the link is printed instead.`,
		Example: "  herdbridge ui\n  herdbridge ui --print   # only print the link (open it on this host, or through ssh -L)",
		Args:    noArgs,
	}
	fs, dir := newFlags(c)
	printOnly := fs.Bool("print", false, "only print the one-time login link")
	c.RunE = func(c *cobra.Command, _ []string) error {
		link, err := gateway.UILogin(*dir)
		if err != nil {
			return err
		}
		if *printOnly {
			fmt.Fprintln(stdout, link)
			return nil
		}
		return opsui.OpenLogin(c.Context(), *dir, link, stdout, stderr)
	}
	return c
}
