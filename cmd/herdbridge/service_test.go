package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServiceArgs: install needs --user; stray arguments are usage
// errors; the flags come from the environment, the command line winning.
func TestServiceArgs(t *testing.T) {
	for _, args := range [][]string{{"service"}, {"service", "install"}, {"service", "install", "--user", "stray"}} {
		_, _, err := cli(args...)
		var u *usageError
		if !errors.As(err, &u) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
	t.Setenv("HERDBRIDGE_STATE_DIR", "/srv/hb state")
	t.Setenv("HERDBRIDGE_USER", "true")
	t.Setenv("HERDBRIDGE_PRINT", "1")
	out, _, err := cli("service", "install", "--command", "/bin/hb")
	if err != nil || !strings.Contains(out, `ExecStart=/bin/hb gateway --state-dir "/srv/hb state"`+"\n") {
		t.Errorf("unit from the environment: %v\n%s", err, out)
	}
	out, _, err = cli("service", "install", "--command", "/bin/hb", "--state-dir", "/flag")
	if err != nil || !strings.Contains(out, "--state-dir /flag\n") {
		t.Errorf("the flag should win over HERDBRIDGE_STATE_DIR: %v\n%s", err, out)
	}
}

// TestServiceUnit: the user unit runs this gateway for the state dir,
// restarts it on failure, quotes what systemd would split or expand, and
// install writes it where systemd looks and says how to start it.
func TestServiceUnit(t *testing.T) {
	out, _, err := cli("service", "install", "--user", "--print", "--command", "/home/me/go/bin/herdbridge", "--state-dir", "/home/me/hb state",
		"--", "--broker", "amqp://u:p%40@mq:5672/", "--host-id", "laptop")
	if err != nil {
		t.Fatal(err)
	}
	want := `[Unit]
Description=herdbridge gateway (message fabric for coding agents)
Documentation=https://github.com/herdbridge/herdbridge#readme

[Service]
ExecStart=/home/me/go/bin/herdbridge gateway --state-dir "/home/me/hb state" --broker amqp://u:p%%40@mq:5672/ --host-id laptop
Restart=on-failure
RestartSec=2

[Install]
WantedBy=default.target
`
	if out != want {
		t.Errorf("unit:\n%s\nwant:\n%s", out, want)
	}
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	out, _, err = cli("service", "install", "--user", "--command", "/usr/bin/herdbridge", "--state-dir", "/srv/hb")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(cfg, "systemd", "user", "herdbridge.service")
	unit, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "\nExecStart=/usr/bin/herdbridge gateway --state-dir /srv/hb\n") || !strings.Contains(out, "systemctl --user enable --now herdbridge") {
		t.Errorf("installed unit:\n%s\noutput:\n%s", unit, out)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("unit mode %v: it may hold a broker password, want 0600", st.Mode())
	}
}
