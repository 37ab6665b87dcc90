package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

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
		// the browser gets a file:// URL naming no secret: its command
		// line is readable by every local uid (opsui.WriteLoginPage)
		page, err := opsui.WriteLoginPage(*dir, link)
		if err != nil {
			return err
		}
		if err := openBrowser(c.Context(), page); err != nil {
			fmt.Fprintf(stderr, "could not open a browser (%v): open this link on this host; it works once, for %s:\n", err, opsui.CodeTTL)
			fmt.Fprintln(stdout, link)
			return nil
		}
		fmt.Fprintf(stderr, "opened the operator page in your browser (if nothing shows, run `herdbridge ui --print`)\n")
		return nil
	}
	return c
}

// openerWait is how long an opener may run before it counts as having
// handed the link over (some block while the browser runs).
const openerWait = 5 * time.Second

// openBrowser hands link to $BROWSER, else the system's opener.
func openBrowser(ctx context.Context, link string) error {
	name, args := opener()
	if name == "" {
		return errors.New("no display and no $BROWSER")
	}
	cmd := exec.Command(name, append(args, link)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, nil, nil
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t := time.NewTimer(openerWait)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	case <-t.C:
		return nil // still running: the browser has it
	case <-ctx.Done():
		return ctx.Err()
	}
}

// opener is the command that opens a URL here: $BROWSER (its first
// entry, words split on spaces), else xdg-open where a display is, open
// on macOS; "" when there is none.
func opener() (string, []string) {
	if b := strings.TrimSpace(strings.Split(os.Getenv("BROWSER"), ":")[0]); b != "" {
		f := strings.Fields(b)
		return f[0], f[1:]
	}
	switch runtime.GOOS {
	case "darwin":
		return "open", nil
	case "windows":
		return "", nil
	}
	if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return "", nil
	}
	if p, err := exec.LookPath("xdg-open"); err == nil {
		return p, nil
	}
	return "", nil
}
