package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/keys/keyscli"
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
		return keyscli.Init(dir, host, stdout, stderr)
	case "show":
		if err := noArgs(); err != nil {
			return err
		}
		info := stderr
		if all {
			info = stdout
		}
		return keyscli.Show(dir, stdout, info)
	case "trust":
		if len(pos) < 2 {
			return errors.New(`usage: herdbridge keys trust HOST KEY… (KEY is the line "herdbridge keys show" prints on HOST)`)
		}
		return keyscli.Trust(dir, host, pos[0], strings.Join(pos[1:], " "), stdout, stderr)
	case "revoke":
		if len(pos) < 1 {
			return errors.New("usage: herdbridge keys revoke HOST [KEY…] (without KEY: every key of HOST)")
		}
		return keyscli.Revoke(dir, pos[0], strings.Join(pos[1:], " "), stdout)
	case "rotate":
		if err := noArgs(); err != nil {
			return err
		}
		return keyscli.Rotate(dir, host, stdout)
	case "rotate-seal":
		if err := noArgs(); err != nil {
			return err
		}
		return keyscli.RotateSeal(dir, host, stdout)
	default:
		return fmt.Errorf("unknown keys subcommand %q: use init, show, trust, revoke or rotate", sub)
	}
}
