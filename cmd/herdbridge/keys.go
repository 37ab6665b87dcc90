package main

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/keys"
)

const keysLong = `Manage this host's signing key and the hosts it trusts (gateways on a broker sign
every message; each verifies against its trust file). It works on the files of the
state dir directly: a running gateway picks up trust changes itself.

  init                 create this host's key if there is none; print it
  show [--all]         print this host's public key (one line, stdout); the fingerprint
                       and trusted hosts go to stderr, or to stdout with --all
  trust HOST KEY…      trust KEY (a line "herdbridge keys show" printed on HOST) for HOST
  revoke HOST [KEY…]   stop trusting KEY of HOST, or every key of HOST
  rotate               replace this host's key; the old one moves to retired_keys/
  rotate-seal          replace this host's HPKE key (sealed bodies); the old one is kept
                       in retired_keys/ for 8 days, so messages sealed to it still open

Flags may come before or after the arguments.`

// keysCommand manages the host key and the trust file of a state dir.
func keysCommand(stdout, stderr io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:   "keys init|show|trust|revoke|rotate [ARGS…]",
		Short: "This host's signing key and the hosts it trusts",
		Long:  keysLong,
		Example: `  herdbridge keys init
  herdbridge keys show                                  # on host A: prints A's key line
  herdbridge keys trust hostA 'ssh-ed25519 AAAA… hostA'  # on host B
  herdbridge keys rotate`,
		ValidArgs: []string{"init", "show", "trust", "revoke", "rotate", "rotate-seal"},
	}
	flags, dir := newFlags(c)
	host := flags.String("host-id", gateway.DefaultHost(), "this host's id (the comment of a new key, and the HOST in the printed commands)")
	all := flags.Bool("all", false, "show: print the fingerprint and the trusted hosts to stdout too")
	c.RunE = func(c *cobra.Command, pos []string) error {
		return cmdKeys(*dir, *host, *all, pos, stdout, stderr)
	}
	return c
}

func cmdKeys(dir, host string, all bool, pos []string, stdout, stderr io.Writer) error {
	if len(pos) == 0 {
		return errors.New("keys needs a subcommand: init, show, trust, revoke or rotate (herdbridge keys --help)")
	}
	sub, pos := pos[0], pos[1:]
	noArgs := func() error {
		if len(pos) > 0 {
			return fmt.Errorf("keys %s takes no arguments, got %q", sub, strings.Join(pos, " "))
		}
		return nil
	}
	switch sub {
	case "init":
		if err := noArgs(); err != nil {
			return err
		}
		return keysInit(dir, host, stdout, stderr)
	case "show":
		if err := noArgs(); err != nil {
			return err
		}
		info := stderr
		if all {
			info = stdout
		}
		return keysShow(dir, stdout, info)
	case "trust":
		if len(pos) < 2 {
			return errors.New(`usage: herdbridge keys trust HOST KEY… (KEY is the line "herdbridge keys show" prints on HOST)`)
		}
		return keysTrust(dir, host, pos[0], strings.Join(pos[1:], " "), stdout, stderr)
	case "revoke":
		if len(pos) < 1 {
			return errors.New("usage: herdbridge keys revoke HOST [KEY…] (without KEY: every key of HOST)")
		}
		return keysRevoke(dir, pos[0], strings.Join(pos[1:], " "), stdout)
	case "rotate":
		if err := noArgs(); err != nil {
			return err
		}
		return keysRotate(dir, host, stdout)
	case "rotate-seal":
		if err := noArgs(); err != nil {
			return err
		}
		return keysRotateSeal(dir, host, stdout)
	default:
		return fmt.Errorf("unknown keys subcommand %q: use init, show, trust, revoke or rotate", sub)
	}
}

func keysInit(dir, host string, stdout, stderr io.Writer) error {
	k, created, err := keys.LoadOrCreate(dir, host)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, keys.KeyFile)
	if created {
		fmt.Fprintf(stdout, "created host key %s\n", path)
	} else {
		fmt.Fprintf(stdout, "host key already exists: %s\n", path)
	}
	fmt.Fprintf(stdout, "fingerprint %s\n%s\n", k.Fingerprint(), k.AuthorizedLine())
	if err := keys.CheckHost(host); err != nil {
		fmt.Fprintf(stderr, "note: %v; start the gateway with a valid --host-id\n", err)
		return nil
	}
	fmt.Fprintf(stdout, "\nto trust this host, on each other host run:\n  herdbridge keys trust %s %s\n", host, shellQuote(k.AuthorizedLine()))
	return nil
}

// errNoKey is the error of commands that need this host's key.
func errNoKey(dir string) error {
	return fmt.Errorf("no host key in %s: run `herdbridge keys init` (the gateway also creates one on first start)", dir)
}

func keysShow(dir string, stdout, info io.Writer) error {
	path := filepath.Join(dir, keys.KeyFile)
	k, err := keys.Load(path)
	if errors.Is(err, fs.ErrNotExist) {
		return errNoKey(dir)
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, k.AuthorizedLine())
	fmt.Fprintf(info, "fingerprint %s (%s)\n", k.Fingerprint(), path)

	if retired, _ := filepath.Glob(filepath.Join(dir, keys.RetiredDir, keys.KeyFile+".*")); len(retired) > 0 {
		fmt.Fprintf(info, "retired keys (still verify this host's own messages):\n")
		sort.Strings(retired)
		for _, p := range retired {
			if r, err := keys.Load(p); err != nil {
				fmt.Fprintf(info, "  %s: %v\n", filepath.Base(p), err)
			} else {
				fmt.Fprintf(info, "  %s  %s\n", r.Fingerprint(), filepath.Base(p))
			}
		}
	}

	trustPath := filepath.Join(dir, keys.TrustFile)
	trusted, err := keys.ReadTrust(trustPath)
	if err != nil {
		return err
	}
	if len(trusted) == 0 {
		fmt.Fprintf(info, "no trusted hosts yet (%s): add them with herdbridge keys trust HOST KEY\n", trustPath)
		return nil
	}
	fmt.Fprintf(info, "trusted hosts (%s):\n", trustPath)
	hosts := make([]string, 0, len(trusted))
	for h := range trusted {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	tw := tabwriter.NewWriter(info, 0, 4, 2, ' ', 0)
	for _, h := range hosts {
		for _, pub := range trusted[h] {
			fmt.Fprintf(tw, "  %s\t%s\n", h, keys.Fingerprint(pub))
		}
	}
	return tw.Flush()
}

func keysTrust(dir, ownHost, host, keyText string, stdout, stderr io.Writer) error {
	if err := keys.CheckHost(host); err != nil {
		return err
	}
	pub, err := keys.ParsePublicKey(keyText)
	if err != nil {
		return err
	}
	if own, err := keys.Load(filepath.Join(dir, keys.KeyFile)); err == nil && own.Public().Equal(pub) && host != ownHost {
		fmt.Fprintf(stderr, "note: this is this host's own key (%s), not %s's: run `herdbridge keys show` on %s for its key\n", ownHost, host, host)
	}
	path := filepath.Join(dir, keys.TrustFile)
	before, err := keys.ReadTrust(path)
	if err != nil {
		return err
	}
	for _, k := range before[host] {
		if k.Equal(pub) {
			fmt.Fprintf(stdout, "%s is already trusted with this key (%s); nothing changed\n", host, keys.Fingerprint(pub))
			return nil
		}
	}
	if err := keys.Trust(path, host, pub); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "trusted %s (%s); a running gateway picks this up within a few seconds\n", host, keys.Fingerprint(pub))
	if n := len(before[host]); n > 0 {
		fmt.Fprintf(stdout, "%s now has %d keys; once it signs with the new one and in-flight messages drained: herdbridge keys revoke %s OLDKEY\n", host, n+1, host)
	}
	return nil
}

func keysRevoke(dir, host, keyText string, stdout io.Writer) error {
	var pub ed25519.PublicKey
	if keyText != "" {
		var err error
		if pub, err = keys.ParsePublicKey(keyText); err != nil {
			return err
		}
	}
	path := filepath.Join(dir, keys.TrustFile)
	before, err := keys.ReadTrust(path)
	if err != nil {
		return err
	}
	n, err := keys.Revoke(path, host, pub)
	if err != nil {
		return err
	}
	var fps []string
	for _, k := range before[host] {
		if pub == nil || k.Equal(pub) {
			fps = append(fps, keys.Fingerprint(k))
		}
	}
	fmt.Fprintf(stdout, "revoked %s: removed %d line(s) for %s; a running gateway refuses it within a few seconds\n", host, n, strings.Join(fps, ", "))
	if left := len(before[host]) - len(fps); left > 0 {
		fmt.Fprintf(stdout, "%s still has %d trusted key(s)\n", host, left)
	} else {
		fmt.Fprintf(stdout, "%s has no trusted key left: its messages are refused\n", host)
	}
	return nil
}

func keysRotate(dir, host string, stdout io.Writer) error {
	old, err := keys.Load(filepath.Join(dir, keys.KeyFile))
	if errors.Is(err, fs.ErrNotExist) {
		return errNoKey(dir)
	}
	if err != nil {
		return err
	}
	nk, err := keys.Rotate(dir, host)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "rotated the host key in %s\n", dir)
	fmt.Fprintf(stdout, "old key %s kept in %s so this host's in-flight messages still verify here\n",
		old.Fingerprint(), filepath.Join(dir, keys.RetiredDir)+string(filepath.Separator))
	fmt.Fprintf(stdout, "new key %s:\n%s\n\n", nk.Fingerprint(), nk.AuthorizedLine())
	fmt.Fprintf(stdout, "next:\n")
	fmt.Fprintf(stdout, "  1. on each other host: herdbridge keys trust %s %s\n", host, shellQuote(nk.AuthorizedLine()))
	fmt.Fprintf(stdout, "  2. restart the gateway here if it is running, so it signs with the new key\n")
	fmt.Fprintf(stdout, "  3. once in-flight messages have drained, on each other host: herdbridge keys revoke %s %s\n", host, shellQuote(old.AuthorizedLine()))
	return nil
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
