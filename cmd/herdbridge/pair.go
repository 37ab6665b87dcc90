package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/keys/pairing"
)

const pairLong = `Pair this host with another over the broker, without copying keys: both hosts end up
trusting each other's key (each trust file gains the other's line), as if
"herdbridge keys trust" had been run on each side by hand.

  pair          on host A: print a one-time code and when it expires, wait for the
                other host, exit 0 once paired
  pair -        on host B: pair with the host that printed the code, read from stdin
                (asked for when stdin is a terminal)
  HERDBRIDGE_PAIR_CODE=CODE pair
                on host B: the same, the code from the environment
  pair CODE     on host B: the same, the code in the command line; it works, but any
                user of host B can read it in ps while pair runs: prefer the two above

Both sides must use the same broker (--broker, as their gateways do). The code is never
sent: it authenticates a password-authenticated key exchange (CPace), so an onlooker on
the broker learns nothing it could test guesses against, and a wrong guess costs an
attempt. The first two characters of the code name the meeting place on the broker and
are not secret. A code works once; the waiting side gives up after --attempts wrong
attempts or at --expires. It works whether or not the gateway runs; a running gateway
picks the new key up from its trust file within seconds.`

// PairCodeEnv is the variable a joiner's code may come in (pair -'s
// alternative for scripts): unlike an argument, no other user reads it.
const PairCodeEnv = "HERDBRIDGE_PAIR_CODE"

// joinCode is the code a `pair` call joins with, and whether it joins at
// all: "-" reads it from stdin (with a prompt on stderr when stdin is a
// terminal), a code argument is taken with a warning that ps shows it,
// and no argument takes $HERDBRIDGE_PAIR_CODE when set (else the call
// offers a code).
func joinCode(pos []string, stdin io.Reader, stderr io.Writer) (string, bool, error) {
	switch {
	case len(pos) == 1 && pos[0] == "-":
		if f, ok := stdin.(*os.File); ok {
			if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
				fmt.Fprint(stderr, "pairing code (as the other host's herdbridge pair printed it): ")
			}
		}
		if stdin == nil {
			return "", false, errors.New("pair -: no stdin to read the code from")
		}
		line, err := bufio.NewReader(io.LimitReader(stdin, 256)).ReadString('\n')
		if err != nil && (!errors.Is(err, io.EOF) || line == "") {
			return "", false, fmt.Errorf("pair -: reading the code from stdin: %w", err)
		}
		return strings.TrimSpace(line), true, nil
	case len(pos) == 1:
		fmt.Fprintf(stderr, "note: a code in the command line is visible in ps to every user of this host while pair runs; prefer `herdbridge pair -` (the code on stdin) or $%s\n", PairCodeEnv)
		return pos[0], true, nil
	}
	if code := os.Getenv(PairCodeEnv); code != "" {
		return strings.TrimSpace(code), true, nil
	}
	return "", false, nil
}

// pairCommand is `herdbridge pair [CODE|-]`.
func pairCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:   "pair [-|CODE]",
		Short: "Pair this host with another over the broker: a one-time code, no keys copied",
		Long:  pairLong,
		Example: `  herdbridge pair --broker amqps://h1@mq:5671/ --broker-password-file ~/.config/herdbridge/broker.pass   # on host A: prints a code
  herdbridge pair - --broker amqps://h2@mq:5671/ --broker-password-file ~/.config/herdbridge/broker.pass   # on host B: type the code`,
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
		raw, join, err := joinCode(pos, stdin, stderr)
		if err != nil {
			return err
		}
		if join {
			code, err := pairing.ParseCode(raw)
			if err != nil {
				return err
			}
			return gateway.PairJoin(c.Context(), cfg, code, out)
		}
		return gateway.PairOffer(c.Context(), cfg, out)
	}
	return c
}
