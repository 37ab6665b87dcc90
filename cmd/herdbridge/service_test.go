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
// install writes it where systemd looks and says how to start it. A
// --broker URL with a password is not in ExecStart (every local user reads
// a process's argv) but in a 0600 EnvironmentFile as HERDBRIDGE_BROKER.
func TestServiceUnit(t *testing.T) {
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	envPath := filepath.Join(cfg, "herdbridge", "gateway.env")
	out, errOut, err := cli("service", "install", "--user", "--print", "--command", "/home/me/go/bin/herdbridge", "--state-dir", "/home/me/hb state",
		"--", "--broker", "amqp://u:p%40@mq:5672/", "--host-id", "laptop")
	if err != nil {
		t.Fatal(err)
	}
	want := `[Unit]
Description=herdbridge gateway (message fabric for coding agents)
Documentation=https://github.com/herdbridge/herdbridge#readme

[Service]
EnvironmentFile=` + envPath + `
ExecStart=/home/me/go/bin/herdbridge gateway --state-dir "/home/me/hb state" --host-id laptop
Restart=on-failure
RestartSec=2

[Install]
WantedBy=default.target
`
	if out != want {
		t.Errorf("unit:\n%s\nwant:\n%s", out, want)
	}
	if !strings.Contains(errOut, `HERDBRIDGE_BROKER="amqp://u:p%40@mq:5672/"`) || !strings.Contains(errOut, "mode 0600") {
		t.Errorf("--print says nothing of the EnvironmentFile: %s", errOut)
	}
	if _, err := os.Stat(envPath); err == nil {
		t.Error("--print wrote the EnvironmentFile")
	}
	out, _, err = cli("service", "install", "--user", "--command", "/usr/bin/herdbridge", "--state-dir", "/srv/hb",
		"--", "--broker=amqp://u:pa$$w@mq:5672/", "--broker-wait", "3s")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(cfg, "systemd", "user", "herdbridge.service")
	unit, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "\nEnvironmentFile="+envPath+"\nExecStart=/usr/bin/herdbridge gateway --state-dir /srv/hb --broker-wait 3s\n") ||
		strings.Contains(string(unit), "pa$") || !strings.Contains(out, "systemctl --user enable --now herdbridge") {
		t.Errorf("installed unit:\n%s\noutput:\n%s", unit, out)
	}
	env, err := os.ReadFile(envPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(env), "\nHERDBRIDGE_BROKER=\"amqp://u:pa\\$\\$w@mq:5672/\"\n") {
		t.Errorf("EnvironmentFile:\n%s", env)
	}
	for p, mode := range map[string]os.FileMode{path: 0o600, envPath: 0o600, filepath.Dir(envPath): 0o700} {
		if st, _ := os.Stat(p); st.Mode().Perm() != mode {
			t.Errorf("%s mode %v, want %o", p, st.Mode(), mode)
		}
	}
	// a URL without a password stays on the command line, with no EnvironmentFile
	out, _, err = cli("service", "install", "--user", "--print", "--command", "/bin/hb", "--state-dir", "/srv/hb", "--", "--broker", "amqp://u@mq/")
	if err != nil || !strings.Contains(out, "--broker amqp://u@mq/\n") || strings.Contains(out, "EnvironmentFile") {
		t.Errorf("a URL without a password: %v\n%s", err, out)
	}
}
