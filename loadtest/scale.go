package loadtest

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The two presence modes a scale run measures side by side.
const (
	ModeByHost    = "by-host"    // issue 25: one heartbeat per host, deltas, snapshots
	ModePerEntity = "per-entity" // before it (`gateway --presence-per-entity`): a heartbeat per entity
)

// ScaleReport is one `make scale` run (scale-out/scale.json): G real
// gateway processes on one throwaway broker, each mode in turn, and the
// in-process simulation's rows when it ran. It is the contract between
// the harness (TestScale) and BENCHMARKS.md (internal/benchreport).
type ScaleReport struct {
	Commit  string    `json:"commit"`
	Started time.Time `json:"started"`
	Machine string    `json:"machine"`
	// LoadStart and LoadEnd are /proc/loadavg's three figures when the run
	// began and ended: the machine may be shared.
	LoadStart string `json:"loadStart,omitempty"`
	LoadEnd   string `json:"loadEnd,omitempty"`
	Broker    string `json:"broker"` // what ran it, e.g. "RabbitMQ 3.10.8, one node, loopback"
	// DeliveriesSource says where the deliveries figure comes from.
	DeliveriesSource string `json:"deliveriesSource"`
	// IntervalS is the gateways' heartbeat period; IdleWindowS how long
	// each run's idle figures are measured over, starting SettleS after
	// convergence.
	IntervalS   float64 `json:"intervalS"`
	IdleWindowS float64 `json:"idleWindowS"`
	SettleS     float64 `json:"settleS"`
	// PollS is how often convergence is checked: the resolution of the
	// convergence and join figures.
	PollS float64    `json:"pollS"`
	Rows  []ScaleRow `json:"rows"`
	// Failures: runs that did not complete (a row says its own error too).
	Failures []string `json:"failures,omitempty"`
}

// ScaleRow is one run: G gateways × E entities in one presence mode.
type ScaleRow struct {
	Gateways int    `json:"gateways"`
	Entities int    `json:"entitiesPerGateway"`
	Mode     string `json:"mode"` // ModeByHost | ModePerEntity
	// DeliveriesPerS is the broker's presence traffic at idle: deliveries
	// from the roster and control queues, summed over every gateway,
	// per second of the idle window; split into its two sources.
	DeliveriesPerS         float64 `json:"deliveriesPerS"`
	PresenceDeliveriesPerS float64 `json:"presenceDeliveriesPerS"`
	ControlDeliveriesPerS  float64 `json:"controlDeliveriesPerS"`
	// PublishesPerS: what the gateways published meanwhile (every
	// presence publish is delivered to every gateway).
	PublishesPerS float64 `json:"publishesPerS"`
	WindowS       float64 `json:"windowS"`
	// StartS: starting the G gateways one after the other, each until
	// it serves. ConvergeS: from the last registration's reply until every
	// gateway holds every other host's entities (and its roster lists all
	// G×E). JoinS: a gateway started after the idle window, from its last
	// registration until its entities are held everywhere and it holds
	// everyone's; JoinFromStartS from its process start.
	StartS float64 `json:"startS"`
	// RegisterS: registering the E entities on every gateway, the
	// gateways in parallel (each registration persists the entity and
	// declares and consumes its broker inbox).
	RegisterS      float64 `json:"registerS"`
	ConvergeS      float64 `json:"convergeS"`
	JoinS          float64 `json:"joinS"`
	JoinFromStartS float64 `json:"joinFromStartS"`
	// JoinServeS: of that, the new gateway's start until it served (the
	// rest is its E registrations).
	JoinServeS float64 `json:"joinServeS"`
	// Broker (beam.smp) and gateway processes over the idle window: CPU
	// in % of one core (utime+stime), RSS at its end. Gateways: the sum
	// over the G processes and the largest one.
	BrokerCPUPct     float64 `json:"brokerCPUPct"`
	BrokerRSSMiB     float64 `json:"brokerRSSMiB"`
	GatewayCPUPctSum float64 `json:"gatewayCPUPctSum"`
	GatewayCPUPctMax float64 `json:"gatewayCPUPctMax"`
	GatewayRSSMiBSum float64 `json:"gatewayRSSMiBSum"`
	GatewayRSSMiBMax float64 `json:"gatewayRSSMiBMax"`
	// Roster sizes through a real MCP call to one gateway (streamable
	// HTTP): the default bridge_roster result and list=true's first page.
	RosterDefault RosterSize `json:"rosterDefault"`
	RosterList    RosterSize `json:"rosterList"`
	// Error: the run did not complete; the figures it has are kept.
	Error string `json:"error,omitempty"`
}

// RosterSize is one bridge_roster result as its client received it.
type RosterSize struct {
	TextBytes       int `json:"textBytes"`
	StructuredBytes int `json:"structuredBytes"`
	// Entities the result names (a summary names few; a page its page).
	Entities int `json:"entities"`
}

// Bytes is text + structuredContent.
func (r RosterSize) Bytes() int { return r.TextBytes + r.StructuredBytes }

// Baseline is the per-entity row of the same size as r, if the run has one.
func (rep *ScaleReport) Baseline(r ScaleRow) (ScaleRow, bool) {
	for _, b := range rep.Rows {
		if b.Mode == ModePerEntity && b.Gateways == r.Gateways && b.Entities == r.Entities && b.Error == "" && b.DeliveriesPerS > 0 {
			return b, true
		}
	}
	return ScaleRow{}, false
}

// Ratio is r's deliveries/s ÷ the per-entity baseline's of the same run.
func (rep *ScaleReport) Ratio(r ScaleRow) (float64, bool) {
	b, ok := rep.Baseline(r)
	if !ok || r.Error != "" {
		return 0, false
	}
	return r.DeliveriesPerS / b.DeliveriesPerS, true
}

// SimReport is the in-process simulation's JSON (scale-out/sim.json,
// TestPresenceSimulatedScale in bridge/memnet/memnettest with
// HB_SCALE_JSON set): simulated hosts on one in-memory network, counting
// deliveries per host per heartbeat period.
type SimReport struct {
	Rows []SimRow `json:"rows"`
}

// SimRow is one simulated run.
type SimRow struct {
	Hosts                 int     `json:"hosts"`
	EntitiesPerHost       int     `json:"entities_per_host"`
	Mode                  string  `json:"mode"` // ModeByHost | ModePerEntity
	IntervalS             float64 `json:"interval_s"`
	DeliveriesPerInterval float64 `json:"deliveries_per_interval"`
	DeliveriesPerS        float64 `json:"deliveries_per_s"`
	PerHostPerInterval    float64 `json:"per_host_per_interval"`
	ConvergeS             float64 `json:"converge_s"`
	WallS                 float64 `json:"wall_s"`
}

// ParseSim reads a SimReport; one without rows is refused.
func ParseSim(r io.Reader) (*SimReport, error) {
	var s SimReport
	if err := json.NewDecoder(io.LimitReader(r, 1<<20)).Decode(&s); err != nil {
		return nil, fmt.Errorf("the simulation's JSON: %w", err)
	}
	if len(s.Rows) == 0 {
		return nil, fmt.Errorf("the simulation's JSON has no rows")
	}
	return &s, nil
}

// ParseScale reads a ScaleReport; one without rows is refused.
func ParseScale(r io.Reader) (*ScaleReport, error) {
	var s ScaleReport
	if err := json.NewDecoder(io.LimitReader(r, 1<<20)).Decode(&s); err != nil {
		return nil, fmt.Errorf("the scale run's JSON: %w", err)
	}
	if len(s.Rows) == 0 {
		return nil, fmt.Errorf("the scale run's JSON has no rows")
	}
	return &s, nil
}

// Issue 25's done-when at G = 20 × E = 20: idle deliveries/s at most a
// tenth of per-entity presence (and of the figure the issue measured
// before it), convergence within 2 s.
const (
	IssueBaselinePerS = 1726.0
	GoalRatio         = 0.1
	GoalConvergeS     = 2.0
)

// Write writes scale.json and scale.md into dir (made if missing); sim
// (nil: not run) and simMissing (why not) go into the markdown.
func (rep *ScaleReport) Write(dir string, sim *SimReport, simMissing string) error {
	return writeReport(dir, "scale", rep, func(w io.Writer) { rep.Markdown(w, sim, simMissing) })
}

// Markdown renders the report: the runs' table, the done-when verdicts
// and the simulation's rows.
func (rep *ScaleReport) Markdown(w io.Writer, sim *SimReport, simMissing string) {
	fmt.Fprintf(w, "# Scale (issue 25)\n\n")
	fmt.Fprintf(w, "Measured %s on commit %s: %s. %s.\n\n", rep.Started.UTC().Format("2006-01-02 15:04 UTC"), orDash(rep.Commit), rep.Machine, rep.Broker)
	if rep.LoadStart != "" || rep.LoadEnd != "" {
		fmt.Fprintf(w, "Load average (1, 5, 15 min): %s at the start, %s at the end.\n\n", orDash(rep.LoadStart), orDash(rep.LoadEnd))
	}
	fmt.Fprintf(w, "Heartbeat period %s s; idle figures over %s s starting %s s after convergence; convergence polled every %s s. Deliveries: %s.\n\n",
		fnum(rep.IntervalS), fnum(rep.IdleWindowS), fnum(rep.SettleS), fnum(rep.PollS), rep.DeliveriesSource)
	ScaleTable(w, rep)
	for _, v := range rep.Verdicts() {
		fmt.Fprintf(w, "- %s\n", v)
	}
	for _, f := range rep.Failures {
		fmt.Fprintf(w, "- **failed**: %s\n", f)
	}
	fmt.Fprintf(w, "\n## Simulated (in-process, bridge/memnet)\n\n")
	if sim == nil {
		fmt.Fprintf(w, "Not measured in this run: %s.\n", simMissing)
		return
	}
	SimTable(w, sim)
}

// ScaleTable writes the runs as one markdown table.
func ScaleTable(w io.Writer, rep *ScaleReport) {
	fmt.Fprintf(w, "| G | E | mode | deliveries/s (presence + control) | ÷ per-entity | converge s | join s (from start; serving after) | broker CPU %% | broker RSS MiB | gateways CPU %% sum / max | gateways RSS MiB sum / max | roster default B (text + structured) | roster list=true page 1 B |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rep.Rows {
		ratio := "—"
		if q, ok := rep.Ratio(r); ok && r.Mode != ModePerEntity {
			ratio = fmt.Sprintf("%.3f×", q)
		}
		deliv := fmt.Sprintf("%s (%s + %s)", fnum(r.DeliveriesPerS), fnum(r.PresenceDeliveriesPerS), fnum(r.ControlDeliveriesPerS))
		if r.Error != "" {
			deliv = "**failed**: " + clip(r.Error, 120)
		}
		fmt.Fprintf(w, "| %d | %d | %s | %s | %s | %s | %s (%s; %s) | %s | %s | %s / %s | %s / %s | %d (%d + %d) | %d (%d + %d) |\n",
			r.Gateways, r.Entities, r.Mode, deliv, ratio, fnum(r.ConvergeS), fnum(r.JoinS), fnum(r.JoinFromStartS), fnum(r.JoinServeS),
			fnum(r.BrokerCPUPct), fnum(r.BrokerRSSMiB), fnum(r.GatewayCPUPctSum), fnum(r.GatewayCPUPctMax),
			fnum(r.GatewayRSSMiBSum), fnum(r.GatewayRSSMiBMax),
			r.RosterDefault.Bytes(), r.RosterDefault.TextBytes, r.RosterDefault.StructuredBytes,
			r.RosterList.Bytes(), r.RosterList.TextBytes, r.RosterList.StructuredBytes)
	}
	fmt.Fprintln(w)
}

// SimTable writes the simulated rows as one markdown table.
func SimTable(w io.Writer, sim *SimReport) {
	rows := append([]SimRow(nil), sim.Rows...)
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].Hosts != rows[j].Hosts {
			return rows[i].Hosts < rows[j].Hosts
		}
		return rows[i].Mode < rows[j].Mode
	})
	fmt.Fprintf(w, "| hosts | entities/host | mode | period s | deliveries/period | deliveries/s | per host per period | converge s | wall s |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(w, "| %d | %d | %s | %s | %s | %s | %s | %s | %s |\n", r.Hosts, r.EntitiesPerHost, r.Mode, fnum(r.IntervalS),
			fnum(r.DeliveriesPerInterval), fnum(r.DeliveriesPerS), fnum(r.PerHostPerInterval), fnum(r.ConvergeS), fnum(r.WallS))
	}
	fmt.Fprintln(w)
}

// Verdicts are issue 25's done-when on the run's G = 20 × E = 20 by-host
// row, met or missed, in words; none when the run has no such row.
func (rep *ScaleReport) Verdicts() []string {
	var out []string
	for _, r := range rep.Rows {
		if r.Mode != ModeByHost || r.Gateways != 20 || r.Entities != 20 || r.Error != "" {
			continue
		}
		if q, ok := rep.Ratio(r); ok {
			b, _ := rep.Baseline(r)
			out = append(out, fmt.Sprintf("G=20×E=20 deliveries/s: %s by host, %s per entity in this run: %.3f× (goal ≤ %.1f×): %s",
				fnum(r.DeliveriesPerS), fnum(b.DeliveriesPerS), q, GoalRatio, metText(q <= GoalRatio)))
		}
		out = append(out, fmt.Sprintf("G=20×E=20 deliveries/s against the issue's %s/s before it: %.3f× (goal ≤ %.1f×): %s",
			fnum(IssueBaselinePerS), r.DeliveriesPerS/IssueBaselinePerS, GoalRatio, metText(r.DeliveriesPerS <= GoalRatio*IssueBaselinePerS)))
		out = append(out, fmt.Sprintf("G=20 convergence after the last registration: %s s (goal ≤ %s s): %s",
			fnum(r.ConvergeS), fnum(GoalConvergeS), metText(r.ConvergeS <= GoalConvergeS)))
	}
	return out
}

func metText(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

// fnum prints a figure with three significant digits, at most.
func fnum(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 100 || v <= -100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10 || v <= -10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case v >= 1 || v <= -1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// ProcSample is a process's CPU time and RSS, from /proc.
type ProcSample struct {
	CPU time.Duration // utime + stime
	RSS uint64        // bytes
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on
// every Linux architecture Go runs on.
const clockTicks = 100

// ReadProc reads pid's CPU time (/proc/PID/stat) and RSS
// (/proc/PID/status).
func ReadProc(pid int) (ProcSample, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcSample{}, err
	}
	cpu, err := ParseStatCPU(string(stat))
	if err != nil {
		return ProcSample{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ProcSample{}, err
	}
	return ProcSample{CPU: cpu, RSS: ParseStatusRSS(string(status))}, nil
}

// ParseStatCPU is utime + stime of a /proc/PID/stat line. The command
// name (field 2) may hold spaces and parentheses: fields are counted from
// its last ')'.
func ParseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("no command name")
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state): utime and stime are fields 14 and 15
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	var ticks uint64
	for _, s := range f[11:13] {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// ParseStatusRSS is VmRSS of a /proc/PID/status text, in bytes (0 when
// it has none: a zombie).
func ParseStatusRSS(status string) uint64 {
	for _, l := range strings.Split(status, "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, _ := strconv.ParseUint(f[0], 10, 64)
				return n << 10
			}
		}
	}
	return 0
}

// CPUPercent is the CPU time between two samples in % of one core over
// wall.
func CPUPercent(before, after ProcSample, wall time.Duration) float64 {
	if wall <= 0 {
		return 0
	}
	return 100 * float64(after.CPU-before.CPU) / float64(wall)
}

// MetricSum sums the samples of the Prometheus text exposition body whose
// name is name and whose labels include every label="value" of want.
func MetricSum(body, name string, want ...string) float64 {
	var sum float64
	for _, l := range strings.Split(body, "\n") {
		if !strings.HasPrefix(l, name) {
			continue
		}
		rest := l[len(name):]
		labels := ""
		switch {
		case strings.HasPrefix(rest, "{"):
			end := strings.IndexByte(rest, '}')
			if end < 0 {
				continue
			}
			labels, rest = rest[1:end], rest[end+1:]
		case strings.HasPrefix(rest, " "):
		default:
			continue // another metric whose name starts with name
		}
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(","+labels+",", ","+w+",")
		}
		f := strings.Fields(rest)
		if !ok || len(f) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(f[0], 64); err == nil {
			sum += v
		}
	}
	return sum
}
