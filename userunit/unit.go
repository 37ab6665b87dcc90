// Package userunit is `herdbridge service install --user`: the systemd
// user unit that runs the gateway for one state dir, where systemd looks
// for it, and the 0600 EnvironmentFile a --broker URL with a password goes
// to instead of the unit's command line.
package userunit

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/herdbridge/herdbridge/internal/fileedit"
)

// Install is one `service install --user` as its flags give it.
type Install struct {
	Command  string   // the executable the unit runs; "" for this binary
	StateDir string   // the gateway's state dir (made absolute)
	Gateway  []string // the flags after --, for the gateway
	Print    bool     // print the unit and write nothing
}

// Run writes the unit (and the EnvironmentFile when the broker URL holds
// a password) and says how to start it, or with Print prints the unit to
// stdout and what the EnvironmentFile must hold to stderr.
func (in Install) Run(stdout, stderr io.Writer) error {
	exe, err := in.executable()
	if err != nil {
		return err
	}
	stateDir, err := filepath.Abs(in.StateDir)
	if err != nil {
		return err
	}
	extra, secretURL := SplitBrokerSecret(in.Gateway)
	envFile := ""
	if secretURL != "" {
		if envFile, err = envPath(); err != nil {
			return err
		}
	}
	unit := Unit(exe, stateDir, extra, envFile)
	if in.Print {
		if envFile != "" {
			fmt.Fprintf(stderr, "the unit reads the broker URL from %s, which --print does not write: put this in it, mode 0600:\n%s", envFile, Env(secretURL))
		}
		_, err := io.WriteString(stdout, unit)
		return err
	}
	path, err := Path()
	if err != nil {
		return err
	}
	if envFile != "" {
		if err := writeEnv(envFile, Env(secretURL), stdout); err != nil {
			return err
		}
	}
	if err := fileedit.Update(path, 0o600, func([]byte) ([]byte, error) { return []byte(unit), nil }, stdout); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "now run:\n  systemctl --user daemon-reload && systemctl --user enable --now herdbridge\n")
	fmt.Fprintf(stdout, "logs: journalctl --user -u herdbridge; to keep it running while you are logged out: loginctl enable-linger\n")
	return nil
}

// executable is the binary the unit runs: --command, else this one —
// unless it is go run's temporary build, which would be gone.
func (in Install) executable() (string, error) {
	if in.Command != "" {
		return in.Command, nil
	}
	p, err := os.Executable()
	if err == nil {
		p, err = filepath.EvalSymlinks(p)
	}
	if err != nil {
		return "", err
	}
	if strings.Contains(p, string(filepath.Separator)+"go-build") {
		return "", errors.New("this binary is temporary (go run): `go install ./cmd/herdbridge` first, or give --command PATH")
	}
	return p, nil
}

// Path is where systemd looks for a user's own units.
func Path() (string, error) {
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

// Unit is the systemd user unit that runs the gateway; envFile, when
// set, is the EnvironmentFile holding the broker URL.
func Unit(exe, stateDir string, extra []string, envFile string) string {
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
