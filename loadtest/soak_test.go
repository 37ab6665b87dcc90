package loadtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge/broker/brokertest"
	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/herdr/herdrtest"
	"github.com/herdbridge/herdbridge/loadtest"
)

// The soak's knobs: HB_SOAK is how long traffic runs (60s in the normal
// suite, 10m for `make soak`), HB_SOAK_REPORT where the report goes (the
// test's temp dir if unset), HB_SOAK_STRICT=1 fails the run on every pass
// criterion, flatness included (the normal suite fails only on the exact
// accounting: flatness over a minute on a shared machine is a figure to
// read, not one to gate CI on).
const (
	envDuration = "HB_SOAK"
	envReport   = "HB_SOAK_REPORT"
	envStrict   = "HB_SOAK_STRICT"
)

// TestSoak: two gateway processes on a private broker, 50 agents over
// streamable HTTP and the stdio relay (primaries, pull workers, workers in
// fake-herdr panes), mixed traffic for HB_SOAK, one gateway kill -9 (and a
// restart on its state dir) and one broker kill -9 and restart during it.
// Every message is accounted for by its tag: accepted ones are delivered
// exactly once or reported by the product; a duplicate is allowed only
// with a kill between its copies (the documented at-least-once window).
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two gateway processes and a broker for a minute")
	}
	run := time.Minute
	if v := os.Getenv(envDuration); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s=%q: %v", envDuration, v, err)
		}
		run = d
	}
	if os.Getenv(envStrict) != "" {
		if _, err := os.Stat("/usr/lib/rabbitmq/bin/rabbitmq-server"); err != nil {
			t.Fatal("the soak needs rabbitmq-server (Debian's package; its system service may stay stopped): apt-get install rabbitmq-server")
		}
	}
	broker := brokertest.StartPrivate(t)
	bin := buildBinary(t)
	work := shortTempDir(t)
	hosts := []string{uniqueHost("soaka"), uniqueHost("soakb")}
	fakes := map[string]*herdrtest.Server{}
	var targets []loadtest.Target
	for _, h := range hosts {
		fakes[h] = herdrtest.New(t, herdrtest.WithSubmitDelay(20*time.Millisecond), herdrtest.WithTurnDuration(50*time.Millisecond))
		targets = append(targets, loadtest.Target{Host: h, StateDir: filepath.Join(work, h), HerdrSocket: fakes[h].SocketPath()})
	}
	trustEachOther(t, bin, targets)
	gws := map[string]*gatewayProc{}
	for _, tg := range targets {
		gws[tg.Host] = startGateway(t, bin, tg, broker.URL, filepath.Join(work, tg.Host+".log"))
	}

	eng := loadtest.New(loadtest.Config{Bin: bin, Targets: targets, Primaries: 7, PullWorkers: 12, PaneWorkers: 6,
		Panes: fakePanes(fakes), ActEvery: time.Second, AskEvery: 8 * time.Second})
	ctx := context.Background()
	if err := eng.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer eng.Close()

	every := 10 * time.Second
	if run < 4*time.Minute {
		every = 2 * time.Second
	}
	smp := loadtest.NewSampler(targets, every)
	sctx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() { defer close(sampled); smp.Run(sctx) }()
	ran := make(chan struct{})
	go func() { defer close(ran); eng.Run(ctx, run) }()

	// the faults, on this goroutine (they may fail the test)
	victim := gws[hosts[1]]
	waitUntil(ran, smp, run*4/10)
	smp.Event("kill -9 gateway %s (pid %d)", victim.host, victim.cmd.Process.Pid)
	eng.Clock.Killing(victim.host)
	victim.kill()
	eng.Clock.Killed(victim.host)
	gws[victim.host] = startGateway(t, bin, targets[1], broker.URL, filepath.Join(work, victim.host+".log"))
	smp.Event("gateway %s restarted on its state dir (pid %d)", victim.host, gws[victim.host].cmd.Process.Pid)
	waitUntil(ran, smp, run*7/10)
	smp.Event("broker kill -9")
	broker.CrashRestart(t)
	smp.Event("broker back on its data dir")
	<-ran
	smp.Event("traffic stopped; draining")
	drain := eng.Drain(ctx, 3*time.Minute)
	smp.Event("drained")
	stopSampling()
	<-sampled

	rep := smp.Report(eng, run, drain, machine())
	dir := os.Getenv(envReport)
	if dir == "" {
		dir = t.TempDir()
	}
	if err := rep.Write(dir); err != nil {
		t.Fatal(err)
	}
	var md strings.Builder
	rep.Markdown(&md)
	t.Logf("soak report (%s):\n%s", dir, md.String())
	for _, k := range rep.Kinds {
		if k.CarriesMessages() && (k.Accepted == 0 || k.Delivered == 0) && !(k.Kind == loadtest.KindAnswer && askedNone(rep)) {
			t.Errorf("no %s was accepted and delivered: the traffic did not run", k.Kind)
		}
	}
	if !rep.AccountingOK || (os.Getenv(envStrict) != "" && !rep.Pass) {
		t.Fatalf("soak failed: %s (gateway logs in %s)", strings.Join(rep.Failures, "; "), work)
	}
}

// waitUntil returns once the sampler's clock reaches at, or traffic ended.
func waitUntil(ran <-chan struct{}, smp *loadtest.Sampler, at time.Duration) {
	select {
	case <-ran:
	case <-time.After(at - smp.Since()):
	}
}

type fakePanes map[string]*herdrtest.Server

func (f fakePanes) NewPane(host, name string) (string, error) {
	return f[host].AddAgent(herdrtest.PaneOptions{Name: name, NewTab: true}), nil
}

func (f fakePanes) Submitted(host, pane string) []string { return f[host].Submitted(pane) }

// trustEachOther gives each state dir a host key and has every host trust
// the others, as operators do with `keys show` and `keys trust`.
func trustEachOther(t *testing.T, bin string, targets []loadtest.Target) {
	lines := map[string]string{}
	for _, tg := range targets {
		runBin(t, bin, "keys", "init", "--host-id", tg.Host, "--state-dir", tg.StateDir)
		lines[tg.Host] = strings.TrimSpace(runBin(t, bin, "keys", "show", "--state-dir", tg.StateDir))
	}
	for _, tg := range targets {
		for _, other := range targets {
			if other.Host != tg.Host {
				runBin(t, bin, "keys", "trust", other.Host, lines[other.Host], "--state-dir", tg.StateDir)
			}
		}
	}
}

func runBin(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, err := exec.Command(bin, args...).Output()
	if err != nil {
		t.Fatalf("herdbridge %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// gatewayProc is a gateway process.
type gatewayProc struct {
	host   string
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process is gone
}

// startGateway starts the gateway of tg on the broker, wired to its fake
// herdr (none without tg.HerdrSocket), and returns once it serves; extra are more gateway flags. A start
// refused because the broker still holds the killed gateway's exclusive
// queues is retried.
func startGateway(t *testing.T, bin string, tg loadtest.Target, brokerURL, logPath string, extra ...string) *gatewayProc {
	t.Helper()
	if err := os.MkdirAll(tg.StateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	herdr := map[string]any{"socket": tg.HerdrSocket}
	if tg.HerdrSocket == "" { // no fake herdr: no herdr at all (no client dialling a socket that is not there)
		herdr = map[string]any{"disabled": true}
	}
	conf, _ := json.Marshal(map[string]any{"herdr": herdr})
	if err := os.WriteFile(filepath.Join(tg.StateDir, "config.json"), conf, 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	deadline := time.Now().Add(60 * time.Second)
	for attempt := 1; ; attempt++ {
		_ = os.Remove(filepath.Join(tg.StateDir, gateway.InfoName))
		cmd := exec.Command(bin, append([]string{"gateway", "--listen", "127.0.0.1:0", "--state-dir", tg.StateDir,
			"--host-id", tg.Host, "--broker", brokerURL, "--log-level", "warn"}, extra...)...)
		cmd.Stderr = logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		gp := &gatewayProc{host: tg.Host, cmd: cmd, exited: make(chan struct{})}
		go func() { _ = cmd.Wait(); close(gp.exited) }()
		t.Cleanup(gp.kill)
		if gp.awaitServing(tg.StateDir, gp.exited, deadline) {
			return gp
		}
		gp.kill()
		if time.Now().After(deadline) {
			t.Fatalf("gateway %s did not come up in %d attempts (log: %s)", tg.Host, attempt, logPath)
		}
		time.Sleep(time.Second)
	}
}

// awaitServing: the gateway wrote its info file and answers on its socket.
func (gp *gatewayProc) awaitServing(dir string, exited <-chan struct{}, deadline time.Time) bool {
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		raw, err := os.ReadFile(filepath.Join(dir, gateway.InfoName))
		var info gateway.Info
		if err == nil && json.Unmarshal(raw, &info) == nil && info.PID == gp.cmd.Process.Pid {
			if _, err := gateway.Ask(dir, gateway.Request{Op: "stats"}); err == nil {
				return true
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// kill kill -9s the gateway and returns once the process is gone.
func (gp *gatewayProc) kill() {
	_ = gp.cmd.Process.Signal(syscall.SIGKILL)
	<-gp.exited
}

func uniqueHost(prefix string) string {
	return prefix + "-" + strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "")
}

// shortTempDir keeps unix socket paths under their 108-byte limit.
func shortTempDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "soak")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func machine() string {
	load, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(load))
	avg := "unknown"
	if len(f) >= 3 {
		avg = strings.Join(f[:3], " ")
	}
	return fmt.Sprintf("%d CPUs, %s/%s, load average %s at the report (shared with other work: figures are indicative)",
		runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, avg)
}

// buildBinary builds herdbridge into the test's temp dir.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "herdbridge")
	out, err := exec.Command("go", "build", "-o", bin, "../cmd/herdbridge").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
