package loadtest_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge/broker/brokertest"
	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/loadtest"
)

// The scale run's knobs (`make scale` sets them): HB_SCALE_G the gateway
// counts, one run of each mode per count ("5,10,20"); HB_SCALE_E the
// entities per gateway (20); HB_SCALE_MODES the modes (both); HB_SCALE_OUT
// where scale.json and scale.md go (the test's temp dir if unset);
// HB_SCALE_BIN the herdbridge binary (built here if unset); HB_SCALE_SIM
// the simulation's JSON to include; HB_SCALE_COMMIT the commit measured.
// The broker is the caller's: RMQ_URL, RMQ_BEAM_PID and the node's
// variables from .ci/rmq.sh's rmq_start.
const (
	envScaleG      = "HB_SCALE_G"
	envScaleE      = "HB_SCALE_E"
	envScaleModes  = "HB_SCALE_MODES"
	envScaleOut    = "HB_SCALE_OUT"
	envScaleBin    = "HB_SCALE_BIN"
	envScaleSim    = "HB_SCALE_SIM"
	envScaleCommit = "HB_SCALE_COMMIT"
)

// The gateways' heartbeat period (bridge.Config's default: the command
// line has no flag for it), and the run's idle timing: settle for two
// periods after convergence (what the registrations set off), then
// measure over three.
const (
	scalePeriod = 5 * time.Second
	scaleSettle = 2 * scalePeriod
	scaleWindow = 3 * scalePeriod
	scalePoll   = 50 * time.Millisecond // a gateway that converged is not asked again
)

// TestScale: issue 25's scale harness. For each G of HB_SCALE_G and each
// presence mode, on a broker reset to empty: G gateway processes with
// their own host ids, keys and state dirs, all trusting each other, E
// entities registered on each; it times convergence, measures the idle
// cost (deliveries, broker and gateway CPU and RSS) over three heartbeat
// periods, sizes bridge_roster through a real MCP call, then starts one
// more gateway and times its join. It reports figures and fails only on
// a run that does not work (no convergence, a gateway that does not start).
func TestScale(t *testing.T) {
	gs := os.Getenv(envScaleG)
	if gs == "" {
		t.Skip("make scale runs it (HB_SCALE_G=… with a broker from .ci/rmq.sh)")
	}
	var counts []int
	for _, f := range strings.FieldsFunc(gs, func(r rune) bool { return r == ',' || r == ' ' }) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 2 {
			t.Fatalf("%s=%q: want gateway counts of at least 2", envScaleG, gs)
		}
		counts = append(counts, n)
	}
	e := 20
	if v := os.Getenv(envScaleE); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a count of at least 1", envScaleE, v)
		}
		e = n
	}
	modes := []string{loadtest.ModeByHost, loadtest.ModePerEntity}
	if v := os.Getenv(envScaleModes); v != "" {
		modes = strings.Split(v, ",")
		for _, m := range modes {
			if m != loadtest.ModeByHost && m != loadtest.ModePerEntity {
				t.Fatalf("%s=%q: modes are %s and %s", envScaleModes, v, loadtest.ModeByHost, loadtest.ModePerEntity)
			}
		}
	}
	url, beam := os.Getenv("RMQ_URL"), os.Getenv("RMQ_BEAM_PID")
	beamPID, err := strconv.Atoi(beam)
	if url == "" || err != nil || os.Getenv("RABBITMQ_NODENAME") == "" {
		t.Fatal("no broker of the run's own: run make scale, which starts one with .ci/rmq.sh (RMQ_URL, RMQ_BEAM_PID and the node's variables)")
	}
	bin := os.Getenv(envScaleBin)
	if bin == "" {
		bin = buildBinary(t)
	}
	out := os.Getenv(envScaleOut)
	if out == "" {
		out = t.TempDir()
	}
	sim, simMissing := readSim(os.Getenv(envScaleSim))

	rep := &loadtest.ScaleReport{Commit: os.Getenv(envScaleCommit), Started: time.Now().UTC(), Machine: machine(),
		LoadStart: loadAvg(), Broker: brokerVersion() + ", one node on loopback, reset to empty before each run",
		DeliveriesSource: "the gateways' own herdbridge_broker_deliveries_total{queue=\"presence\"|\"control\"} from /metrics, summed over every gateway " +
			"(each counts what the broker pushed to its consumers; the broker runs without its management plugin, so it counts nothing itself)",
		IntervalS: scalePeriod.Seconds(), IdleWindowS: scaleWindow.Seconds(), SettleS: scaleSettle.Seconds(), PollS: scalePoll.Seconds()}
	sc := &scaleRun{t: t, bin: bin, url: url, beam: beamPID, work: shortTempDir(t)}
	for _, g := range counts {
		ids := sc.identities(g + 1)
		for _, mode := range modes {
			t.Logf("G=%d E=%d %s: starting", g, e, mode)
			row := sc.run(g, e, mode, ids)
			if row.Error != "" {
				rep.Failures = append(rep.Failures, fmt.Sprintf("G=%d E=%d %s: %s", g, e, mode, row.Error))
			}
			rep.Rows = append(rep.Rows, row)
			t.Logf("G=%d E=%d %s: %.1f deliveries/s, converged %.2f s, join %.2f s, broker CPU %.1f%%, error %q",
				g, e, mode, row.DeliveriesPerS, row.ConvergeS, row.JoinS, row.BrokerCPUPct, row.Error)
			rep.LoadEnd = loadAvg()
			if err := rep.Write(out, sim, simMissing); err != nil { // after every run: a later failure keeps the earlier rows
				t.Fatal(err)
			}
		}
	}
	var md strings.Builder
	rep.Markdown(&md, sim, simMissing)
	t.Logf("scale report (%s):\n%s", out, md.String())
	for _, f := range rep.Failures {
		t.Errorf("run failed: %s", f)
	}
}

// readSim reads the simulation's JSON, or says why there is none.
func readSim(path string) (*loadtest.SimReport, string) {
	if path == "" {
		return nil, "HB_SCALE_SIM unset: run make scale"
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Sprintf("%v (TestPresenceSimulatedScale in bridge/memnet/memnettest writes it with HB_SCALE_JSON set: run make scale)", err)
	}
	defer f.Close()
	s, err := loadtest.ParseSim(f)
	if err != nil {
		return nil, err.Error()
	}
	return s, ""
}

func loadAvg() string {
	raw, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func brokerVersion() string {
	out, err := exec.Command("dpkg-query", "-W", "-f", "${Version}", "rabbitmq-server").Output()
	if err != nil || len(out) == 0 {
		return "RabbitMQ"
	}
	return "RabbitMQ " + strings.TrimSpace(string(out))
}

// scaleRun is what the runs share: the binary, the broker, a work dir.
type scaleRun struct {
	t    *testing.T
	bin  string
	url  string
	beam int
	work string
	seq  int
}

// identities makes n hosts' key material, each trusting all the others,
// once for both modes' runs: a template state dir per host, copied into
// each run's fresh state dirs.
func (sc *scaleRun) identities(n int) []loadtest.Target {
	targets := make([]loadtest.Target, n)
	for i := range targets {
		targets[i] = loadtest.Target{Host: fmt.Sprintf("scale%02d", i+1), StateDir: filepath.Join(sc.work, fmt.Sprintf("keys%d", n), fmt.Sprintf("h%02d", i+1))}
	}
	trustEachOther(sc.t, sc.bin, targets)
	return targets
}

// resetBroker empties the broker (users, queues, exchanges: back to a
// fresh node's guest and /) in the same VM, whose PID the CPU and RSS
// figures read.
func (sc *scaleRun) resetBroker() {
	for _, args := range [][]string{{"stop_app"}, {"reset"}, {"start_app"}, {"await_startup"}} {
		brokertest.Ctl(sc.t, args...)
	}
}

// scaleGateway is one running gateway of a run.
type scaleGateway struct {
	loadtest.Target
	proc  *gatewayProc
	url   string // its HTTP listener
	token string // a bearer token (its first entity's) for /metrics
}

func (sc *scaleRun) run(g, e int, mode string, ids []loadtest.Target) (row loadtest.ScaleRow) {
	t := sc.t
	row = loadtest.ScaleRow{Gateways: g, Entities: e, Mode: mode}
	sc.resetBroker()
	sc.seq++
	dir := filepath.Join(sc.work, fmt.Sprintf("run%d", sc.seq))
	var extra []string
	if mode == loadtest.ModePerEntity {
		extra = append(extra, "--presence-per-entity")
	}
	var gws []*scaleGateway
	defer func() {
		for _, gw := range gws {
			gw.proc.kill()
		}
	}()
	start := func(id loadtest.Target) *scaleGateway {
		tg := id
		tg.StateDir = filepath.Join(dir, id.Host)
		copyDir(t, id.StateDir, tg.StateDir)
		gw := &scaleGateway{Target: tg}
		gw.proc = startGateway(t, sc.bin, tg, sc.url, filepath.Join(dir, tg.Host+".log"), extra...)
		gws = append(gws, gw)
		return gw
	}
	begun := time.Now()
	for _, id := range ids[:g] {
		start(id)
	}
	row.StartS = time.Since(begun).Seconds()

	registering := time.Now()
	if err := registerAll(gws, e); err != nil {
		row.Error = err.Error()
		return row
	}
	last := time.Now()
	row.RegisterS = last.Sub(registering).Seconds()
	deadline := last.Add(60*time.Second + time.Duration(g)*time.Second)
	if err := awaitPresence(gws, g, e, deadline); err != nil {
		row.Error = fmt.Sprintf("not converged %.0f s after the last registration: %v", time.Since(last).Seconds(), err)
		return row
	}
	row.ConvergeS = time.Since(last).Seconds()
	// what the counts say, the rosters show (read after: building G
	// rosters of G×E entities is no part of the time to converge)
	if err := awaitRosters(gws, g*e, deadline); err != nil {
		row.Error = fmt.Sprintf("presence counts converged, rosters did not: %v", err)
		return row
	}

	time.Sleep(scaleSettle)
	if err := sc.idle(gws, &row); err != nil {
		row.Error = err.Error()
		return row
	}
	if err := awaitPresence(gws, g, e, time.Now()); err != nil {
		row.Error = fmt.Sprintf("entities expired at idle: %v", err)
		return row
	}
	if err := sc.rosterSizes(gws[0], &row); err != nil {
		row.Error = err.Error()
		return row
	}

	// the join: one more gateway, known to every other by its key already
	joinStart := time.Now()
	nw := start(ids[g])
	row.JoinServeS = time.Since(joinStart).Seconds()
	if err := registerAll(gws[g:], e); err != nil {
		row.Error = "join: " + err.Error()
		return row
	}
	joined := time.Now()
	if err := awaitPresence(gws, g+1, e, joined.Add(60*time.Second+time.Duration(g)*time.Second)); err != nil {
		row.Error = fmt.Sprintf("join: %s's entities not seen everywhere (or it does not see everyone) %.0f s after its last registration: %v",
			nw.Host, time.Since(joined).Seconds(), err)
		return row
	}
	row.JoinS, row.JoinFromStartS = time.Since(joined).Seconds(), time.Since(joinStart).Seconds()
	return row
}

// registerAll registers e workers on every gateway of gws, the gateways
// in parallel, and keeps each gateway's URL and first token.
func registerAll(gws []*scaleGateway, e int) error {
	var wg sync.WaitGroup
	errs := make([]error, len(gws))
	for i, gw := range gws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range e {
				r, err := gateway.Ask(gw.StateDir, gateway.Request{Op: "register", Name: fmt.Sprintf("w%03d", j), Role: "worker"})
				if err != nil {
					errs[i] = fmt.Errorf("register on %s: %w", gw.Host, err)
					return
				}
				if j == 0 {
					gw.url, gw.token = r.URL, r.Token
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// awaitPresence polls each gateway's presence counts (stats, no roster
// built) until it holds the g-1 other hosts and their entities, or the
// deadline passes (a deadline already past checks once). A gateway that
// got there is not asked again.
func awaitPresence(gws []*scaleGateway, g, e int, deadline time.Time) error {
	pending := append([]*scaleGateway(nil), gws...)
	for {
		var still []*scaleGateway
		var why string
		for _, gw := range pending {
			r, err := gateway.Ask(gw.StateDir, gateway.Request{Op: "stats"})
			switch {
			case err != nil:
				why = fmt.Sprintf("%s: %v", gw.Host, err)
			case r.Stats.Presence.Hosts != g-1 || r.Stats.Presence.Entities != (g-1)*e:
				why = fmt.Sprintf("%s holds %d other hosts and %d of their entities, want %d and %d",
					gw.Host, r.Stats.Presence.Hosts, r.Stats.Presence.Entities, g-1, (g-1)*e)
			default:
				continue
			}
			still = append(still, gw)
		}
		if len(still) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d gateways short, e.g. %s", len(still), why)
		}
		pending = still
		time.Sleep(scalePoll)
	}
}

// awaitRosters checks what `herdbridge roster` shows on every gateway:
// n entities, this host's and the others'.
func awaitRosters(gws []*scaleGateway, n int, deadline time.Time) error {
	for _, gw := range gws {
		for {
			r, err := gateway.Ask(gw.StateDir, gateway.Request{Op: "roster"})
			got := -1
			if err == nil && r.Roster != nil {
				got = 0
				for _, en := range r.Roster.Entities {
					if !strings.HasPrefix(en.Name, "_") {
						got++
					}
				}
			}
			if got == n {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s's roster lists %d entities, want %d (%v)", gw.Host, got, n, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// idleSample is what the idle window reads at each end.
type idleSample struct {
	at                time.Time
	broker            loadtest.ProcSample
	gateways          []loadtest.ProcSample
	presence, control float64
	publishes         float64
}

func (sc *scaleRun) sample(gws []*scaleGateway) (idleSample, error) {
	var s idleSample
	for _, gw := range gws {
		body, err := scrape(gw)
		if err != nil {
			return s, err
		}
		s.presence += loadtest.MetricSum(body, "herdbridge_broker_deliveries_total", `queue="presence"`)
		s.control += loadtest.MetricSum(body, "herdbridge_broker_deliveries_total", `queue="control"`)
		s.publishes += loadtest.MetricSum(body, "herdbridge_broker_publishes_total")
	}
	s.at = time.Now()
	var err error
	if s.broker, err = loadtest.ReadProc(sc.beam); err != nil {
		return s, fmt.Errorf("broker process %d: %w", sc.beam, err)
	}
	for _, gw := range gws {
		p, err := loadtest.ReadProc(gw.proc.cmd.Process.Pid)
		if err != nil {
			return s, fmt.Errorf("gateway %s: %w", gw.Host, err)
		}
		s.gateways = append(s.gateways, p)
	}
	return s, nil
}

// idle measures the idle window into row.
func (sc *scaleRun) idle(gws []*scaleGateway, row *loadtest.ScaleRow) error {
	before, err := sc.sample(gws)
	if err != nil {
		return err
	}
	time.Sleep(scaleWindow)
	after, err := sc.sample(gws)
	if err != nil {
		return err
	}
	wall := after.at.Sub(before.at)
	secs := wall.Seconds()
	row.WindowS = secs
	row.PresenceDeliveriesPerS = (after.presence - before.presence) / secs
	row.ControlDeliveriesPerS = (after.control - before.control) / secs
	row.DeliveriesPerS = row.PresenceDeliveriesPerS + row.ControlDeliveriesPerS
	row.PublishesPerS = (after.publishes - before.publishes) / secs
	row.BrokerCPUPct = loadtest.CPUPercent(before.broker, after.broker, wall)
	row.BrokerRSSMiB = mib(after.broker.RSS)
	for i := range after.gateways {
		cpu := loadtest.CPUPercent(before.gateways[i], after.gateways[i], wall)
		rss := mib(after.gateways[i].RSS)
		row.GatewayCPUPctSum += cpu
		row.GatewayCPUPctMax = max(row.GatewayCPUPctMax, cpu)
		row.GatewayRSSMiBSum += rss
		row.GatewayRSSMiBMax = max(row.GatewayRSSMiBMax, rss)
	}
	return nil
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// scrape reads gw's /metrics with its token.
func scrape(gw *scaleGateway) (string, error) {
	req, err := http.NewRequest("GET", gw.url+"/metrics", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+gw.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("scrape %s: %w", gw.Host, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("scrape %s: %s %v", gw.Host, resp.Status, err)
	}
	return string(body), nil
}

// rosterSizes calls bridge_roster over streamable HTTP as one of gw's
// entities: the default result, and list=true's first page.
func (sc *scaleRun) rosterSizes(gw *scaleGateway, row *loadtest.ScaleRow) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, err := loadtest.Connect(ctx, sc.bin, gw.StateDir, gw.Host, loadtest.AgentSpec{Name: "w000", Role: "worker", Transport: loadtest.HTTP})
	if err != nil {
		return fmt.Errorf("roster: connect to %s: %w", gw.Host, err)
	}
	defer a.Close()
	for _, c := range []struct {
		args map[string]any
		into *loadtest.RosterSize
	}{{map[string]any{}, &row.RosterDefault}, {map[string]any{"list": true}, &row.RosterList}} {
		r, err := a.Call(ctx, "bridge_roster", c.args, 30*time.Second)
		if err != nil || r.IsError {
			return fmt.Errorf("bridge_roster %v on %s: %v %s", c.args, gw.Host, err, r.Text)
		}
		*c.into = loadtest.RosterSize{TextBytes: r.TextBytes, StructuredBytes: r.StructuredBytes, Entities: r.Listed}
	}
	return nil
}

// copyDir copies the files of from (key material: no subdirectories
// matter) into a new dir to.
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o700); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range ents {
		if !en.Type().IsRegular() {
			continue
		}
		info, err := en.Info()
		if err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(filepath.Join(from, en.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, en.Name()), raw, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
}
