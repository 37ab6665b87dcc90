package opsui

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
)

// OpenLogin is `herdbridge ui`: it opens the one-time login link in this
// user's browser, through a login page in stateDir, or, where no browser
// works (no display, an SSH session), prints the link to stdout and says
// why on stderr.
func OpenLogin(ctx context.Context, stateDir, link string, stdout, stderr io.Writer) error {
	// the browser gets a file:// URL naming no secret: its command
	// line is readable by every local uid (WriteLoginPage)
	page, err := WriteLoginPage(stateDir, link)
	if err != nil {
		return err
	}
	if err := openBrowser(ctx, page); err != nil {
		fmt.Fprintf(stderr, "could not open a browser (%v): open this link on this host; it works once, for %s:\n", err, CodeTTL)
		fmt.Fprintln(stdout, link)
		return nil
	}
	fmt.Fprintf(stderr, "opened the operator page in your browser (if nothing shows, run `herdbridge ui --print`)\n")
	return nil
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
