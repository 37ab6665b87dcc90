package main

import (
	"errors"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/herdbridge/herdbridge/cliout"
	"github.com/herdbridge/herdbridge/gateway"
)

// errDoctorFailed makes `herdbridge doctor` exit non-zero once it printed
// its checks.
var errDoctorFailed = errors.New("doctor: some checks failed (see fix)")

func doctorCommand(stdout io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:   "doctor [--json]",
		Short: "Check the gateway, state dir, stores, herdr, broker, keys, trust both ways and clock skew, and say what to fix",
		Long: `Doctor prints one line per check — ok, warn or fail — with the fix, and exits
non-zero when any check fails. It asks the running gateway for what only it
knows (herdr, its broker link, the other hosts' trust and clocks from their
heartbeats) and checks the state dir's files itself, so it helps when the
gateway is down too (then --broker probes the broker).`,
		Example: "  herdbridge doctor\n  herdbridge doctor --json | jq '.checks[] | select(.status != \"ok\")'",
		Args:    noArgs,
	}
	fs, dir := newFlags(c)
	asJSON := fs.Bool("json", false, "print JSON: {ok, checks: [{name, status, detail, fix}]}")
	configPath := fs.String("config", "", "configuration file (default: config.json in the state dir): herdr's socket when no gateway answers")
	brokerURL := addBrokerFlag(fs, "broker URL to probe when no gateway answers (default $HERDBRIDGE_BROKER)")
	brokerPasswordFile := brokerPasswordFlag(fs)
	c.RunE = func(c *cobra.Command, _ []string) error {
		broker := brokerURL.String()
		if file, err := gateway.StateConfig(*dir, *configPath); err == nil { // a bad config is doctor's to report, not to stop on
			if broker, err = gateway.JoinBrokerPassword(broker, *brokerPasswordFile, file); err != nil {
				return err
			}
		}
		res := gateway.Doctor(c.Context(), gateway.DoctorOptions{StateDir: *dir, ConfigPath: *configPath, Broker: broker, Argv: os.Args})
		if err := cliout.Doctor(stdout, res, *asJSON); err != nil {
			return err
		}
		if !res.OK {
			return errDoctorFailed
		}
		return nil
	}
	return c
}
