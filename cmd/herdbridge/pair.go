package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/herdbridge/herdbridge/gateway"
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
		file, err := gateway.StateConfig(*dir, "")
		if err != nil {
			return err
		}
		broker, err := gateway.JoinBrokerPassword(brokerURL.String(), *brokerPasswordFile, file)
		if err != nil {
			return err
		}
		cfg := gateway.PairConfig{StateDir: *dir, Host: *host, Broker: broker, BrokerCA: *brokerCA,
			BrokerCert: *brokerCert, BrokerKey: *brokerKey, Expires: *expires, MaxFailures: *attempts, Logger: log}
		out := gateway.PairOutput{W: stdout, JSON: *asJSON}
		if len(pos) == 1 {
			code, err := pairing.ParseCode(pos[0])
			if err != nil {
				return err
			}
			return gateway.PairJoin(c.Context(), cfg, code, out)
		}
		return gateway.PairOffer(c.Context(), cfg, out)
	}
	return c
}
