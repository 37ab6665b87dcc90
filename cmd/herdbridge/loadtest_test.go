package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// loadJSON is the contract of `loadtest --json` with the `make bench`
// report, written out here on its own: a renamed or dropped field of the
// tool fails the decoding (unknown fields are refused, and every field
// is checked below).
type loadJSON struct {
	Target          string         `json:"target"`
	Primaries       int            `json:"primaries"`
	Workers         int            `json:"workers"`
	Registered      int            `json:"registered"`
	Transports      map[string]int `json:"transports"`
	DurationSeconds float64        `json:"durationSeconds"`
	Totals          struct {
		Calls     int     `json:"calls"`
		Errors    int     `json:"errors"`
		Accepted  int     `json:"accepted"`
		Owed      int     `json:"owed"`
		Delivered int     `json:"delivered"`
		Lost      int     `json:"lost"`
		PerSecond float64 `json:"perSecond"`
	} `json:"totals"`
	Kinds []struct {
		Kind          string  `json:"kind"`
		Calls         int     `json:"calls"`
		Errors        int     `json:"errors"`
		PerSecond     float64 `json:"perSecond"`
		CallP50Ms     float64 `json:"callP50Ms"`
		CallP90Ms     float64 `json:"callP90Ms"`
		CallP99Ms     float64 `json:"callP99Ms"`
		DeliveryP50Ms float64 `json:"deliveryP50Ms"`
		DeliveryP90Ms float64 `json:"deliveryP90Ms"`
		DeliveryP99Ms float64 `json:"deliveryP99Ms"`
	} `json:"kinds"`
	Gateway struct {
		RSSBytes   uint64  `json:"rssBytes"`
		CPUSeconds float64 `json:"cpuSeconds"`
		Goroutines int     `json:"goroutines"`
	} `json:"gateway"`
}

// runLoadtest runs the built binary's loadtest with args; it returns
// stdout, stderr and the exit status.
func runLoadtest(t *testing.T, bin string, args ...string) (stdout, stderr string, status int) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"loadtest"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		status = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errb.String(), status
}

// TestLoadtestInProcess: `loadtest --in-process --json` starts its own
// gateway, every kind of traffic flows over both transports, the roster
// is timed after --register, nothing fails or is lost (exit 0), and the
// JSON is the contract's, every field filled.
func TestLoadtestInProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds herdbridge and runs agents for seconds")
	}
	bin := buildBinary(t)
	out, errOut, status := runLoadtest(t, bin, "--in-process", "--primaries", "2", "--workers", "2", "--duration", "4s",
		"--rate", "4", "--register", "5", "--roster-calls", "5", "--json")
	if status != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", status, out, errOut)
	}
	var r loadJSON
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("the JSON is not the contract's: %v\n%s", err, out)
	}
	if r.Target != "in-process" || r.Primaries != 2 || r.Workers != 2 || r.Registered != 5 || r.DurationSeconds < 4 {
		t.Errorf("run facts: %+v", r)
	}
	if r.Transports["http"] != 3 || r.Transports["stdio"] != 1 {
		t.Errorf("transports %v: want the primaries and one worker over http, the other worker over stdio", r.Transports)
	}
	calls := map[string]int{}
	for _, k := range r.Kinds {
		calls[k.Kind] = k.Calls
		if k.Calls > 0 && (k.CallP50Ms <= 0 || k.CallP90Ms < k.CallP50Ms || k.CallP99Ms < k.CallP90Ms || k.PerSecond <= 0) {
			t.Errorf("%s: call figures %+v", k.Kind, k)
		}
		carries := k.Kind != "poll" && k.Kind != "roster"
		if k.Calls > 0 && carries && (k.DeliveryP50Ms <= 0 || k.DeliveryP90Ms < k.DeliveryP50Ms || k.DeliveryP99Ms < k.DeliveryP90Ms) {
			t.Errorf("%s: delivery figures %+v", k.Kind, k)
		}
	}
	for _, k := range []string{"brief", "reply", "ask", "answer", "broadcast", "poll", "roster"} {
		if calls[k] == 0 {
			t.Errorf("no %s call (kinds %v)", k, calls)
		}
	}
	if _, ok := calls["pane-brief"]; !ok || calls["roster"] != 5 {
		t.Errorf("kinds %v: want every engine kind, pane-brief included, and 5 roster calls", calls)
	}
	tot := r.Totals
	if tot.Errors != 0 || tot.Lost != 0 || tot.Accepted == 0 || tot.Owed < tot.Accepted || tot.Delivered != tot.Owed || tot.Calls == 0 || tot.PerSecond <= 0 {
		t.Errorf("totals %+v", tot)
	}
	if r.Gateway.RSSBytes == 0 || r.Gateway.CPUSeconds <= 0 || r.Gateway.Goroutines == 0 {
		t.Errorf("gateway figures %+v", r.Gateway)
	}
	if !strings.Contains(errOut, "loadtest: run lt-") {
		t.Errorf("no progress on stderr: %q", errOut)
	}
}

// TestLoadtestRunningGateway: two loadtests at once against a running
// gateway (found by its state dir, as every command finds it): neither
// sees the other's traffic (their names and groups are their own), both
// pass, and afterwards the gateway's roster holds only the entity that
// was there before.
func TestLoadtestRunningGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("builds herdbridge and runs agents for seconds")
	}
	bin := buildBinary(t)
	g := gatewaytest.StartLocal(t, "")
	if _, err := gateway.Ask(g.StateDir(), gateway.Request{Op: "register", Name: "resident", Role: "worker"}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	outs := make([]string, 2)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, errOut, status := runLoadtest(t, bin, "--state-dir", g.StateDir(), "--primaries", "2", "--workers", "2",
				"--duration", "3s", "--rate", "4", "--register", "3", "--roster-calls", "3")
			if status != 0 {
				t.Errorf("run %d: exit %d\nstdout: %s\nstderr: %s", i, status, out, errOut)
			}
			outs[i] = out
		}()
	}
	wg.Wait()
	for _, out := range outs {
		for _, want := range []string{"against testhost@" + g.StateDir(), "result: OK", "brief", "roster", "gateway: RSS"} {
			if !strings.Contains(out, want) {
				t.Errorf("report without %q:\n%s", want, out)
			}
		}
	}
	r, err := gateway.Ask(g.StateDir(), gateway.Request{Op: "roster"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range r.Roster.Entities {
		if e.Name != "resident" {
			t.Errorf("%s@%s left on the gateway after the runs", e.Name, e.Host)
		}
	}
}

// TestLoadtestUsage: bad flags are usage errors (exit 2); no gateway on
// the state dir is a plain failure (exit 1).
func TestLoadtestUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--primaries", "0"}, {"--workers", "-1"}, {"--duration", "0s"}, {"--rate", "0"}, {"--rate", "NaN"},
		{"--register", "-3"}, {"--transport", "pigeon"}, {"--bogus"}, {"extra"},
	} {
		_, _, err := cli(append([]string{"loadtest"}, args...)...)
		var u *usageError
		if !errors.As(err, &u) {
			t.Errorf("loadtest %q: %v, want a usage error", args, err)
		}
	}
	_, _, err := cli("loadtest", "--state-dir", t.TempDir(), "--duration", "1s")
	var u *usageError
	if err == nil || errors.As(err, &u) || !strings.Contains(err.Error(), "herdbridge gateway") {
		t.Errorf("loadtest without a gateway: %v, want a plain error saying how to start one", err)
	}
}

// TestLoadtestInterrupted: Ctrl-C during the traffic ends the run at
// once with exit status 1 and the report of what ran, and whatever it
// registered is gone from the gateway.
func TestLoadtestInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("builds herdbridge and runs agents for seconds")
	}
	bin := buildBinary(t)
	g := gatewaytest.StartLocal(t, "")
	cmd := exec.Command(bin, "loadtest", "--state-dir", g.StateDir(), "--primaries", "2", "--workers", "2",
		"--duration", "10m", "--rate", "4", "--register", "3", "--roster-calls", "3")
	var out bytes.Buffer
	cmd.Stdout = &out
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	for sc.Scan() && !strings.Contains(sc.Text(), "agents connected") {
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() { // drain, so the process never blocks on a full pipe
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("interrupted run: %v, want exit status 1\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "herdbridge loadtest against") {
		t.Errorf("no report of what ran:\n%s", out.String())
	}
	r, err := gateway.Ask(g.StateDir(), gateway.Request{Op: "roster"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range r.Roster.Entities {
		t.Errorf("%s@%s left on the gateway after the interrupted run", e.Name, e.Host)
	}
}
