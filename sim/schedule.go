package sim

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// Op is what one action of a schedule does.
type Op string

// Traffic: always part of a schedule.
const (
	OpSend      Op = "send"      // a primary sends N briefs to a worker (pull or pane)
	OpReply     Op = "reply"     // a worker sends N replies to a primary
	OpBroadcast Op = "broadcast" // a primary broadcasts to all
	OpAsk       Op = "ask"       // a worker asks a primary (a short wait; resumed at the end)
	OpPoll      Op = "poll"      // a pull entity drains (N=1: a long poll, waiting for an ask); a primary answers each ASK it drains
	OpRespawn   Op = "respawn"   // a worker that was stopped, removed or reaped registers again
	OpPause     Op = "pause"     // nothing for N × 100 ms: timers run (only in hand-written schedules)
)

// Faults: each belongs to a Fault kind, selectable.
const (
	OpPollAbandon Op = "poll-abandon" // drain, then settle its handover not delivered (the client never read it)
	OpPollStall   Op = "poll-stall"   // drain and keep the handover open: settled delivered by a later settle
	OpSettle      Op = "settle"       // settle every stalled handover delivered (late)
	OpStop        Op = "stop"         // bridge_stop of a worker by a primary
	OpRemove      Op = "remove"       // herdbridge remove of a worker on its gateway
	OpReap        Op = "reap"         // the clock jumps past ReapAfter: idle pull workers are reaped
	OpRestart     Op = "restart"      // clean gateway restart
	OpKill        Op = "kill"         // kill -9 of a gateway, then a start in the same state directory
	OpDiskFull    Op = "disk-full"    // a gateway's disk fills up
	OpDiskFree    Op = "disk-free"    // … and has room again
	OpCut         Op = "cut"          // a gateway loses its broker connection
	OpHeal        Op = "heal"         // … and gets it back
	OpSwallow     Op = "swallow"      // a pane swallows the Enter of the next briefs (and of own-draft recovery)
	OpPaneClose   Op = "pane-close"   // a worker's pane closes
	OpHerdrDown   Op = "herdr-down"   // herdr stops answering on a gateway
	OpHerdrUp     Op = "herdr-up"     // … and answers again
)

// Fault is a selectable kind of fault; a schedule holds only the kinds
// it was generated with.
type Fault string

// The fault kinds and the ops each brings.
var faultOps = map[Fault][]Op{
	"abandon": {OpPollAbandon},
	"stall":   {OpPollStall, OpSettle},
	"stop":    {OpStop, OpRespawn},
	"remove":  {OpRemove, OpRespawn},
	"reap":    {OpReap, OpRespawn},
	"restart": {OpRestart},
	"kill":    {OpKill},
	"disk":    {OpDiskFull, OpDiskFree},
	"cut":     {OpCut, OpHeal},
	"pane":    {OpSwallow, OpPaneClose, OpHerdrDown, OpHerdrUp, OpRespawn},
}

// AllFaults lists every fault kind, in a stable order.
func AllFaults() []Fault {
	return []Fault{"abandon", "stall", "stop", "remove", "reap", "restart", "kill", "disk", "cut", "pane"}
}

// ParseFaults reads a comma-separated list of fault kinds ("all", "none"
// or "" for none).
func ParseFaults(s string) ([]Fault, error) {
	switch strings.TrimSpace(s) {
	case "", "none":
		return nil, nil
	case "all":
		return AllFaults(), nil
	}
	var out []Fault
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if _, ok := faultOps[Fault(f)]; !ok {
			return nil, fmt.Errorf("sim: no fault kind %q (kinds: %v)", f, AllFaults())
		}
		out = append(out, Fault(f))
	}
	return out, nil
}

// Action is one thing a round does. Entities are named by index: host i
// runs primary p<i>, pull worker w<i> and pane worker pw<i>.
type Action struct {
	Op     Op
	Host   int    // the gateway it acts on (faults), or the actor's
	Actor  string // entity acting (sender, poller, caller)
	Target string // entity acted on
	N      int    // how many messages
}

func (a Action) String() string {
	var b strings.Builder
	b.WriteString(string(a.Op))
	if a.Actor != "" {
		fmt.Fprintf(&b, " %s", a.Actor)
	} else {
		fmt.Fprintf(&b, " h%d", a.Host)
	}
	if a.Target != "" {
		fmt.Fprintf(&b, " -> %s", a.Target)
	}
	if a.N > 0 {
		fmt.Fprintf(&b, " x%d", a.N)
	}
	return b.String()
}

// Step is one round: its actions run concurrently, and the next round
// starts when they all returned.
type Step struct {
	Index   int
	Actions []Action
}

func (s Step) String() string {
	parts := make([]string, len(s.Actions))
	for i, a := range s.Actions {
		parts[i] = a.String()
	}
	return fmt.Sprintf("%3d: %s", s.Index, strings.Join(parts, " | "))
}

// Schedule is everything a run does, generated from its seed.
type Schedule struct {
	// Scenario names a hand-written schedule (TestSimScenarios); "" for a
	// generated one.
	Scenario string
	Seed     uint64
	Hosts    int
	Faults   []Fault
	Steps    []Step
}

// Generate is the schedule of seed with the given fault kinds and number
// of rounds: a pure function of its arguments.
func Generate(seed uint64, faults []Fault, rounds int) Schedule {
	r := rand.New(rand.NewPCG(seed, 0x5eed5eed))
	s := Schedule{Seed: seed, Hosts: 2 + r.IntN(2), Faults: faults}
	var ops []Op
	for _, f := range faults {
		ops = append(ops, faultOps[f]...)
	}
	for i := range rounds {
		n := 1 + r.IntN(3)
		st := Step{Index: i}
		for range n {
			if len(ops) > 0 && r.IntN(10) < 3 {
				st.Actions = append(st.Actions, s.fault(r, ops[r.IntN(len(ops))]))
				continue
			}
			st.Actions = append(st.Actions, s.traffic(r)...)
		}
		s.Steps = append(s.Steps, st)
	}
	return s
}

func (s Schedule) primary(r *rand.Rand) (string, int) {
	h := r.IntN(s.Hosts)
	return fmt.Sprintf("p%d", h), h
}

func (s Schedule) worker(r *rand.Rand) (string, int) {
	h := r.IntN(s.Hosts)
	if r.IntN(2) == 0 {
		return fmt.Sprintf("w%d", h), h
	}
	return fmt.Sprintf("pw%d", h), h
}

// puller is an entity that drains by polling: a primary or a pull worker.
func (s Schedule) puller(r *rand.Rand) (string, int) {
	h := r.IntN(s.Hosts)
	if r.IntN(2) == 0 {
		return fmt.Sprintf("p%d", h), h
	}
	return fmt.Sprintf("w%d", h), h
}

func (s Schedule) traffic(r *rand.Rand) []Action {
	switch k := r.IntN(10); {
	case k < 4:
		p, h := s.primary(r)
		w, _ := s.worker(r)
		return []Action{{Op: OpSend, Host: h, Actor: p, Target: w, N: 1 + r.IntN(4)}}
	case k < 6:
		w, h := s.worker(r)
		p, _ := s.primary(r)
		return []Action{{Op: OpReply, Host: h, Actor: w, Target: p, N: 1 + r.IntN(3)}}
	case k < 7:
		p, h := s.primary(r)
		if r.IntN(3) == 0 {
			return []Action{{Op: OpBroadcast, Host: h, Actor: p}}
		}
		w, wh := s.worker(r)
		return []Action{{Op: OpAsk, Host: wh, Actor: w, Target: p}, {Op: OpPoll, Host: h, Actor: p, N: 1}}
	default:
		e, h := s.puller(r)
		return []Action{{Op: OpPoll, Host: h, Actor: e}}
	}
}

func (s Schedule) fault(r *rand.Rand, op Op) Action {
	h := r.IntN(s.Hosts)
	a := Action{Op: op, Host: h}
	switch op {
	case OpPollAbandon, OpPollStall:
		a.Actor, a.Host = s.puller(r)
	case OpStop:
		a.Actor, a.Host = s.primary(r)
		a.Target, _ = s.worker(r)
	case OpRemove:
		a.Target = fmt.Sprintf("w%d", h)
		if r.IntN(2) == 0 {
			a.Target = fmt.Sprintf("pw%d", h)
		}
	case OpRespawn:
		a.Target, a.Host = s.worker(r)
	case OpSwallow, OpPaneClose:
		a.Target = fmt.Sprintf("pw%d", h)
		a.N = 1 + r.IntN(3)
	}
	return a
}

// Keep returns s with only the rounds whose indexes keep says (nil: all),
// for shrinking a failing schedule by hand.
func (s Schedule) Keep(keep func(int) bool) Schedule {
	if keep == nil {
		return s
	}
	out := s
	out.Steps = nil
	for _, st := range s.Steps {
		if keep(st.Index) {
			out.Steps = append(out.Steps, st)
		}
	}
	return out
}

// ParseSteps reads a step filter: "3,5,10-20"; "" keeps every step.
func ParseSteps(spec string) (func(int) bool, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, nil
	}
	type span struct{ lo, hi int }
	var spans []span
	for _, p := range strings.Split(spec, ",") {
		var lo, hi int
		if _, err := fmt.Sscanf(p, "%d-%d", &lo, &hi); err == nil {
			spans = append(spans, span{lo, hi})
			continue
		}
		if _, err := fmt.Sscanf(p, "%d", &lo); err != nil {
			return nil, fmt.Errorf("sim: step filter %q: want indexes and ranges such as 3,5,10-20", spec)
		}
		spans = append(spans, span{lo, lo})
	}
	return func(i int) bool {
		for _, s := range spans {
			if i >= s.lo && i <= s.hi {
				return true
			}
		}
		return false
	}, nil
}
