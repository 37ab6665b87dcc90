// Package keyscli is `herdbridge keys`: each subcommand makes one change
// to a state dir's key files (through package keys) and says what it did
// and what to run next on the other hosts.
package keyscli

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
	"time"

	"github.com/herdbridge/herdbridge/keys"
)

// Init creates this host's key if there is none and prints it, with the
// command that trusts it on the other hosts.
func Init(dir, host string, stdout, stderr io.Writer) error {
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

// Show prints this host's public key line to stdout; its fingerprint,
// the retired keys and the trusted hosts to info.
func Show(dir string, stdout, info io.Writer) error {
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

// Trust adds keyText as a key of host to the trust file (once).
func Trust(dir, ownHost, host, keyText string, stdout, stderr io.Writer) error {
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

// Revoke removes keyText of host, or with keyText "" every key of host,
// from the trust file.
func Revoke(dir, host, keyText string, stdout io.Writer) error {
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

// Rotate replaces this host's signing key (the old one is retired, so
// in-flight messages still verify) and prints the steps that follow.
func Rotate(dir, host string, stdout io.Writer) error {
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

// RotateSeal replaces this host's HPKE key. Nothing to do on the other
// hosts: the running gateway here reloads it and its signed heartbeat
// publishes the new key; what was sealed to the old one still opens here
// for keys.SealRetention.
func RotateSeal(dir, host string, stdout io.Writer) error {
	old, _, err := keys.LoadOrCreateSealKey(dir, host)
	if err != nil {
		return err
	}
	nk, err := keys.RotateSealKey(dir, host, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "rotated the HPKE key in %s: %s → %s\n", dir, old.ID(), nk.ID())
	fmt.Fprintf(stdout, "the old key stays in retired_keys/ for %s, so messages sealed to it still open here\n", keys.SealRetention)
	fmt.Fprintf(stdout, "a running gateway picks the new key up within seconds and publishes it in its heartbeat: nothing to do on the other hosts\n")
	return nil
}
