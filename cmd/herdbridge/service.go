package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/herdbridge/herdbridge/userunit"
)

func serviceCommand(stdout, stderr io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:   "service install --user [--print] [-- GATEWAY-FLAGS…]",
		Short: "Run the gateway as a systemd user service",
		Example: `  herdbridge service install --user
  herdbridge service install --user --print
  herdbridge service install --user -- --broker amqp://user@mq:5672/ --broker-password-file ~/.config/herdbridge/broker.pass --host-id laptop   # the URL goes to a 0600 EnvironmentFile`,
		Args: noArgs,
	}
	install := &cobra.Command{
		Use:   "install --user [--print] [-- GATEWAY-FLAGS…]",
		Short: "Write a systemd user unit that runs herdbridge gateway",
		Long: `Write ~/.config/systemd/user/herdbridge.service ($XDG_CONFIG_HOME if set), a systemd
user unit that runs "herdbridge gateway" for the state dir, restarting it on failure, and
print the systemctl line that enables and starts it. Flags after -- go to the gateway;
a --broker URL with a password is not put on the unit's command line (readable by
every local user) but in $XDG_CONFIG_HOME/herdbridge/gateway.env, mode 0600, as
HERDBRIDGE_BROKER, which the unit loads as its EnvironmentFile.`,
		Example: `  herdbridge service install --user && systemctl --user enable --now herdbridge
  herdbridge service install --user --print > herdbridge.service`,
	}
	c.AddCommand(install)
	c.RunE = needSubcommand
	fs, dir := newFlags(install)
	user := fs.Bool("user", false, "a user unit (required: the gateway belongs to one user, so no system-wide unit is offered)")
	printOnly := fs.Bool("print", false, "print the unit and write nothing")
	command := fs.String("command", "", "the herdbridge executable the unit runs (default: this binary)")
	install.RunE = func(c *cobra.Command, extra []string) error {
		if c.ArgsLenAtDash() < 0 && len(extra) > 0 || c.ArgsLenAtDash() > 0 {
			return &usageError{err: fmt.Errorf("service install: unexpected argument %q (gateway flags go after --)", extra[0]), line: c.UseLine(), path: c.CommandPath()}
		}
		if !*user {
			return &usageError{err: errors.New("service install needs --user: only a systemd user unit is offered"), line: c.UseLine(), path: c.CommandPath()}
		}
		in := userunit.Install{Command: *command, StateDir: *dir, Gateway: extra, Print: *printOnly}
		return in.Run(stdout, stderr)
	}
	return c
}
