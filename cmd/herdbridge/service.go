package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

func serviceCommand(stdout, stderr io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:   "service install --user [--print] [-- GATEWAY-FLAGS…]",
		Short: "Run the gateway as a systemd user service",
		Example: `  herdbridge service install --user
  herdbridge service install --user --print
  herdbridge service install --user -- --broker amqp://user:pass@mq:5672/ --host-id laptop   # the URL goes to a 0600 EnvironmentFile`,
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
		exe := *command
		if exe == "" {
			p, err := os.Executable()
			if err == nil {
				p, err = filepath.EvalSymlinks(p)
			}
			if err != nil {
				return err
			}
			if strings.Contains(p, string(filepath.Separator)+"go-build") {
				return errors.New("this binary is temporary (go run): `go install ./cmd/herdbridge` first, or give --command PATH")
			}
			exe = p
		}
		stateDir, err := filepath.Abs(*dir)
		if err != nil {
			return err
		}
		extra, secretURL := splitBrokerSecret(extra)
		envPath := ""
		if secretURL != "" {
			if envPath, err = serviceEnvPath(); err != nil {
				return err
			}
		}
		unit := userUnit(exe, stateDir, extra, envPath)
		if *printOnly {
			if envPath != "" {
				fmt.Fprintf(stderr, "the unit reads the broker URL from %s, which --print does not write: put this in it, mode 0600:\n%s", envPath, serviceEnv(secretURL))
			}
			_, err := io.WriteString(stdout, unit)
			return err
		}
		path, err := userUnitPath()
		if err != nil {
			return err
		}
		if envPath != "" {
			if err := writeServiceEnv(envPath, serviceEnv(secretURL), stdout); err != nil {
				return err
			}
		}
		if err := updateFile(path, 0o600, func([]byte) ([]byte, error) { return []byte(unit), nil }, stdout); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "now run:\n  systemctl --user daemon-reload && systemctl --user enable --now herdbridge\n")
		fmt.Fprintf(stdout, "logs: journalctl --user -u herdbridge; to keep it running while you are logged out: loginctl enable-linger\n")
		return nil
	}
	return c
}

// userUnitPath is where systemd looks for a user's own units.
func userUnitPath() (string, error) {
	base := os.Getenv("XDG_CONFIG_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		base = filepath.Join(home, ".config")
	}
	return filepath.Join(base, "systemd", "user", "herdbridge.service"), nil
}

// userUnit is the systemd user unit that runs the gateway; envFile, when
// set, is the EnvironmentFile holding the broker URL.
func userUnit(exe, stateDir string, extra []string, envFile string) string {
	argv := append([]string{exe, "gateway", "--state-dir", stateDir}, extra...)
	for i, a := range argv {
		argv[i] = systemdQuote(a)
	}
	env := ""
	if envFile != "" {
		env = "EnvironmentFile=" + strings.ReplaceAll(envFile, "%", "%%") + "\n"
	}
	return `[Unit]
Description=herdbridge gateway (message fabric for coding agents)
Documentation=https://github.com/herdbridge/herdbridge#readme

[Service]
` + env + `ExecStart=` + strings.Join(argv, " ") + `
Restart=on-failure
RestartSec=2

[Install]
WantedBy=default.target
`
}

// systemdQuote quotes one ExecStart word: systemd splits on whitespace,
// unquotes "…" with C escapes, and expands % specifiers and $ variables.
func systemdQuote(s string) string {
	s = strings.ReplaceAll(s, "%", "%%")
	s = strings.ReplaceAll(s, "$", "$$")
	if s != "" && !strings.ContainsAny(s, " \t\n\"'\\;") {
		return s
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`)
	return `"` + r.Replace(s) + `"`
}
