package main

import (
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// TestDoctorCommand: a healthy gateway → every line ok, exit 0, and the
// same as JSON; the gateway stopped → a fail line with its fix and a
// non-zero exit.
func TestDoctorCommand(t *testing.T) {
	dir := gatewaytest.TempDir(t)
	g := gatewaytest.StartLocal(t, dir)
	out, _, err := cli("doctor", "--state-dir", dir)
	if err != nil {
		t.Fatalf("healthy: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(line, "ok ") {
			t.Fatalf("healthy: a line that is not ok: %q\n%s", line, out)
		}
	}
	if !regexp.MustCompile(`(?m)^ok +gateway +answering: host testhost, embedded transport`).MatchString(out) {
		t.Fatalf("healthy output:\n%s", out)
	}
	js, _, err := cli("doctor", "--state-dir", dir, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var res gateway.DoctorResult
	if err := json.Unmarshal([]byte(js), &res); err != nil || !res.OK || len(res.Checks) < 5 {
		t.Fatalf("--json: %v %+v\n%s", err, res, js)
	}

	g.Close()
	out, _, err = cli("doctor", "--state-dir", dir)
	var u *usageError
	if !errors.Is(err, errDoctorFailed) || errors.As(err, &u) {
		t.Fatalf("gateway down: err %v (want a failed doctor: exit 1)\n%s", err, out)
	}
	if !regexp.MustCompile(`(?m)^fail +gateway +no gateway answers on .*\n +fix: start it: ` + "`herdbridge gateway --state-dir").MatchString(out) {
		t.Fatalf("gateway down output:\n%s", out)
	}
}
