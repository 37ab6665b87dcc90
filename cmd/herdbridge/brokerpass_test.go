package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// procArgv is a process's command line as every local user reads it.
func procArgv(t *testing.T, pid int) string {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	return strings.ReplaceAll(string(raw), "\x00", " ")
}

// doctorCheck runs `herdbridge doctor --json` on dir and returns its check
// named name.
func doctorCheck(t *testing.T, bin, dir, name string) gateway.Check {
	t.Helper()
	cmd := exec.Command(bin, "doctor", "--json", "--state-dir", dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, _ := cmd.Output()
	var res gateway.DoctorResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("doctor --json: %v\n%s\n%s", err, out, stderr.String())
	}
	for _, c := range res.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("doctor has no %q check:\n%s", name, out)
	return gateway.Check{}
}

// TestBrokerPasswordOutOfArgv: a real gateway process meets the real
// broker with the password from --broker-password-file (then from
// $HERDBRIDGE_BROKER_PASSWORD_FILE): its command line, which every local
// user reads in /proc, holds no password, and doctor says so. A password
// file other users may read is refused with the chmod to run. A gateway
// given the password in --broker runs, and doctor warns of it, redacted.
func TestBrokerPasswordOutOfArgv(t *testing.T) {
	raw := brokerURL(t)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	pw, ok := u.User.Password()
	if !ok {
		t.Skipf("the test broker URL %s has no password to keep out of argv", u.Redacted())
	}
	bare := *u
	bare.User = url.User(u.User.Username())
	bin := buildBinary(t)
	pwFile := filepath.Join(gatewaytest.TempDir(t), "broker-password")
	if err := os.WriteFile(pwFile, []byte(pw+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := gatewaytest.TempDir(t)
	out, err := exec.Command(bin, "gateway", "--state-dir", dir, "--listen", "127.0.0.1:0", "--broker", bare.String(), "--broker-password-file", pwFile).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "chmod 600 "+pwFile) {
		t.Fatalf("a 0644 password file: %v\n%s", err, out)
	}
	if err := os.Chmod(pwFile, 0o600); err != nil {
		t.Fatal(err)
	}

	host := gatewaytest.UniqueHost("pw")
	gp := startGatewayProcArgs(t, bin, dir, host, "--broker", bare.String(), "--broker-password-file", pwFile)
	if argv := procArgv(t, gp.cmd.Process.Pid); strings.Contains(argv, ":"+pw+"@") || !strings.Contains(argv, bare.String()) {
		t.Fatalf("the gateway's command line: %s", argv)
	}
	if c := doctorCheck(t, bin, dir, "argv"); c.Status != gateway.CheckOK {
		t.Errorf("doctor argv: %+v", c)
	}
	if c := doctorCheck(t, bin, dir, "broker"); c.Status != gateway.CheckOK {
		t.Errorf("doctor broker (the password from the file must log in): %+v", c)
	}
	gp.kill()

	t.Setenv(gateway.BrokerPasswordFileEnv, pwFile)
	gp = startGatewayProcArgs(t, bin, dir, host, "--broker", bare.String())
	if c := doctorCheck(t, bin, dir, "broker"); c.Status != gateway.CheckOK {
		t.Errorf("doctor broker with $%s: %+v", gateway.BrokerPasswordFileEnv, c)
	}
	gp.kill()
	os.Unsetenv(gateway.BrokerPasswordFileEnv)

	gp = startGatewayProcArgs(t, bin, dir, host, "--broker", raw)
	c := doctorCheck(t, bin, dir, "argv")
	if c.Status != gateway.CheckWarn || !strings.Contains(c.Detail, "--broker "+u.Redacted()) || strings.Contains(c.Detail, ":"+pw+"@") ||
		!strings.Contains(c.Fix, "--broker-password-file") {
		t.Errorf("doctor with the password in --broker: %+v", c)
	}
	gp.kill()
}
