package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/keys"
	"github.com/herdbridge/herdbridge/keys/pairing"
)

const pairLong = `Pair this host with another over the broker, without copying keys: both hosts end up
trusting each other's key (each trust file gains the other's line), as if
"herdbridge keys trust" had been run on each side by hand.

  pair          on host A: print a one-time code and when it expires, wait for the
                other host, exit 0 once paired
  pair CODE     on host B: pair with the host that printed CODE

Both sides must use the same broker (--broker, as their gateways do). The code is never
sent: it authenticates a password-authenticated key exchange (CPace), so an onlooker on
the broker learns nothing it could test guesses against, and a wrong guess costs an
attempt. The first two characters of the code name the meeting place on the broker and
are not secret. A code works once; the waiting side gives up after --attempts wrong
attempts or at --expires. It works whether or not the gateway runs; a running gateway
picks the new key up from its trust file within seconds.`

// pairCommand is `herdbridge pair [CODE]`.
func pairCommand(stdout, stderr io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:   "pair [CODE]",
		Short: "Pair this host with another over the broker: a one-time code, no keys copied",
		Long:  pairLong,
		Example: `  herdbridge pair --broker amqps://h1:PW@mq:5671/       # on host A: prints a code
  herdbridge pair K7QM-4XJ9 --broker amqps://h2:PW@mq:5671/   # on host B`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) > 1 {
				return &usageError{err: fmt.Errorf("pair takes at most one code, got %d arguments", len(args)), line: c.UseLine(), path: c.CommandPath()}
			}
			return nil
		},
	}
	fs, dir := newFlags(c)
	host := fs.String("host-id", gateway.DefaultHost(), "this host's id (as its gateway's --host-id)")
	brokerURL := addBrokerFlag(fs, "amqp[s]:// URL of the broker the gateways meet on (default $HERDBRIDGE_BROKER)")
	brokerPasswordFile := brokerPasswordFlag(fs)
	brokerCA := fs.String("broker-ca", "", "PEM CA bundle that verifies an amqps:// broker (default: the system roots)")
	brokerCert := fs.String("broker-cert", "", "PEM client certificate for an amqps:// broker (with --broker-key)")
	brokerKey := fs.String("broker-key", "", "PEM private key of --broker-cert")
	asJSON := fs.Bool("json", false, `print JSON lines: first {"code":…,"expires":…} (initiator), then {"paired":…,"fingerprint":…}`)
	expires := fs.Duration("expires", pairing.DefaultExpires, "initiator: how long the code works")
	attempts := fs.Int("attempts", pairing.DefaultMaxFailures, "initiator: wrong attempts before the code is dead")
	c.RunE = func(c *cobra.Command, pos []string) error {
		log, err := newLogger(stderr, "warn", "text")
		if err != nil {
			return err
		}
		file, err := stateConfig(*dir, "")
		if err != nil {
			return err
		}
		broker, err := withBrokerPassword(brokerURL.String(), *brokerPasswordFile, file)
		if err != nil {
			return err
		}
		cfg := gateway.PairConfig{StateDir: *dir, Host: *host, Broker: broker, BrokerCA: *brokerCA,
			BrokerCert: *brokerCert, BrokerKey: *brokerKey, Expires: *expires, MaxFailures: *attempts, Logger: log}
		out := pairOutput{w: stdout, json: *asJSON}
		if len(pos) == 1 {
			code, err := pairing.ParseCode(pos[0])
			if err != nil {
				return err
			}
			return pairJoin(c, cfg, code, out)
		}
		return pairOffer(c, cfg, out)
	}
	return c
}

// pairOutput prints the pairing's progress as text or JSON lines.
type pairOutput struct {
	w    io.Writer
	json bool
}

func (o pairOutput) line(v map[string]any, text string) {
	if o.json {
		b, _ := json.Marshal(v)
		fmt.Fprintf(o.w, "%s\n", b)
		return
	}
	fmt.Fprintln(o.w, text)
}

func (o pairOutput) paired(p *gateway.Pairing, r pairing.Result) {
	fp := keys.Fingerprint(r.PeerKey)
	text := fmt.Sprintf("paired with %s (%s): it is trusted in %s; a running gateway picks it up within a few seconds", r.Peer, fp, p.TrustFile())
	if r.Failures > 0 {
		text += fmt.Sprintf("\n%d wrong attempt(s) were refused before", r.Failures)
	}
	if trusted, err := keys.ReadTrust(p.TrustFile()); err == nil && len(trusted[r.Peer]) > 1 {
		text += fmt.Sprintf("\n%s now has %d trusted keys; if its old key is gone: herdbridge keys revoke %s OLDKEY", r.Peer, len(trusted[r.Peer]), r.Peer)
	}
	o.line(map[string]any{"paired": r.Peer, "fingerprint": fp, "failures": r.Failures}, text)
}

func pairOffer(c *cobra.Command, cfg gateway.PairConfig, out pairOutput) error {
	ctx := c.Context()
	p, err := gateway.OpenPairing(ctx, cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	offer, err := p.Offer(ctx)
	if err != nil {
		return err
	}
	defer offer.Close()
	exp := offer.Expires().UTC().Truncate(time.Second)
	out.line(map[string]any{"code": offer.Code().String(), "expires": exp.Format(time.RFC3339)},
		fmt.Sprintf("pairing code %s (expires %s, in %s; works once)\non the other host run:  herdbridge pair %s\nwaiting for it…",
			offer.Code(), exp.Format(time.RFC3339), time.Until(exp).Round(time.Second), offer.Code()))
	res, err := offer.Wait(ctx)
	if err != nil {
		return err
	}
	out.paired(p, res)
	return nil
}

func pairJoin(c *cobra.Command, cfg gateway.PairConfig, code pairing.Code, out pairOutput) error {
	ctx := c.Context()
	p, err := gateway.OpenPairing(ctx, cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	res, err := p.Join(ctx, code)
	if err != nil {
		return err
	}
	out.paired(p, res)
	return nil
}
