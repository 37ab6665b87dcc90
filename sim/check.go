package sim

import (
	"fmt"
	"sort"
	"strings"

	"github.com/herdbridge/herdbridge/bridge"
)

// Invariants a run checks; a Report lists every breach under one of them.
const (
	BreachLost        = "lost"            // accepted, neither delivered nor reported to its sender
	BreachTwoFates    = "two fates"       // delivered (or typed) and reported FAILED as well
	BreachTypedTwice  = "typed twice"     // a brief typed into a pane more than once
	BreachDuplicate   = "duplicate"       // delivered twice with no crash to explain it
	BreachNoReceipt   = "no receipt"      // typed, but its sender never heard how far it got
	BreachWrongTarget = "wrong recipient" // drained by an entity it was not for
	BreachAskOpen     = "ask unresolved"  // an ask whose turn never ended for its asker
	BreachNoDeadLog   = "no dead-letter record"
	BreachStuck       = "stuck action" // an action (a removal, a call) that never ended once every fault was healed
)

// Report is the outcome of one schedule.
type Report struct {
	Schedule Schedule
	Settled  bool                // quiescence reached before its deadline
	Breaches map[string][]string // invariant -> what broke it (msgIds with their history)
	Counts   map[string]int      // what the run did
	Ghosts   []string            // delivered though no call accepted them (a kill cut the call): not breaches
}

// OK reports whether no invariant broke.
func (r *Report) OK() bool { return len(r.Breaches) == 0 }

func (r *Report) breach(kind, what string) {
	if r.Breaches == nil {
		r.Breaches = map[string][]string{}
	}
	r.Breaches[kind] = append(r.Breaches[kind], what)
}

// check judges the ledger once the run is quiet. kills names the hosts a
// kill -9 hit (a duplicate delivery there is the documented
// at-least-once window); dead is every host's dead-letter log.
func (w *world) check(settled bool, killed map[int]bool, dead map[string]bool) *Report {
	rep := &Report{Schedule: w.sched, Settled: settled, Counts: map[string]int{}}
	l := w.acct
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, v := range l.counts {
		rep.Counts[k] = v
	}
	ids := make([]string, 0, len(l.byID))
	for id := range l.byID {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		m := l.byID[id]
		if m.Tag == "" { // seen, but no call accepted it
			if maxOf(m.typed) > 1 { // per pane: a ghost broadcast is typed once into each
				rep.breach(BreachTypedTwice, m.String())
			}
			if sum(m.typed)+sum(m.delivered) > 0 {
				rep.Ghosts = append(rep.Ghosts, fmt.Sprintf("%s %q (%s)", m.ID, m.Body, l.refused[m.Body]))
			}
			continue
		}
		w.checkOne(rep, m, killed, dead)
	}
	for _, a := range l.asks {
		if !terminalAsk(a.Status) {
			if e := w.ents[a.Asker]; e != nil {
				if gid, alive := e.state(); alive && gid == a.AskerGID {
					rep.breach(BreachAskOpen, fmt.Sprintf("turn %s: %s asked %s %q: still %s", a.TurnID, a.Asker, a.Target, a.Tag, a.Status))
				}
			}
		}
	}
	return rep
}

func maxOf(m map[string]int) int {
	n := 0
	for _, v := range m {
		n = max(n, v)
	}
	return n
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func (w *world) checkOne(rep *Report, m *msgRec, killed map[int]bool, dead map[string]bool) {
	delivered := sum(m.delivered)
	typed := sum(m.typed)
	if m.Kind == kindBroadcast {
		for who, n := range m.delivered {
			if n > 1 && !killed[w.ents[who].host] {
				rep.breach(BreachDuplicate, fmt.Sprintf("%s had it %d times: %s", who, n, m))
			}
		}
		for pane, n := range m.typed {
			if n > 1 {
				rep.breach(BreachTypedTwice, fmt.Sprintf("%s: %s", pane, m))
			}
		}
		rep.Counts["broadcast copies delivered"] += delivered + typed
		return
	}
	if m.Kind == kindAnswer && m.To == "" { // answered before the ask's call returned
		if a := w.acct.asks[strings.TrimPrefix(m.ID, "answer:")]; a != nil {
			m.To = a.Asker
		}
	}
	got := delivered
	if m.Pane {
		// typed and left in the composer is not delivered; but a brief
		// reported uncertain that nothing resolved later (its pane closed
		// first) may have reached the agent, as its sender was told
		got = m.submitted
		if got == 0 && m.failed == 0 {
			got = typed
		}
		if typed > 1 {
			rep.breach(BreachTypedTwice, m.String())
		}
		// an ABANDONED (its worker went before replying to the brief it
		// was working on) tells the sender it got that far: it may
		// overtake the INJECTED and settle the brief's receipt
		if typed > 0 && !m.receipt && m.failed == 0 && m.abandoned == 0 && !m.senderGone {
			rep.breach(BreachNoReceipt, m.String())
		}
	}
	for who, n := range m.delivered {
		if who != m.To {
			rep.breach(BreachWrongTarget, fmt.Sprintf("%s drained it: %s", who, m))
		}
		if n > 1 && !killed[w.ents[who].host] {
			rep.breach(BreachDuplicate, m.String())
		} else if n > 1 {
			rep.Counts["duplicates after a kill"]++
		}
	}
	reported := m.failed > 0 || (m.abandoned > 0 && got == 0)
	switch {
	case got == 0 && !reported && m.senderGone:
		rep.Counts["undelivered, sender gone"]++
	case got == 0 && !reported && w.orphanAnswer(m):
		rep.Counts["answers in a turn its asker can no longer read"]++
	case got == 0 && !reported:
		rep.breach(BreachLost, m.String())
	case got > 0 && m.failed > 0:
		rep.breach(BreachTwoFates, m.String())
	case got > 0:
		rep.Counts["delivered "+m.Kind]++
	default:
		rep.Counts["reported "+m.Kind]++
		if m.Status != bridge.StatusFailed && m.Kind != kindAnswer && !dead[m.ID] {
			rep.breach(BreachNoDeadLog, m.String())
		}
	}
}

// orphanAnswer reports whether m is an answer delivered into a turn that
// no asker is left to read: the asker was removed (or came back as a new
// incarnation, which cannot resume the turn) after the answer landed, or
// the ask's own call was cut by a restart or kill, so no client ever
// learned the turn to resume. The answerer was told "delivered" (the
// turn has it); what becomes of the asker is its own fate, not the
// answer's. The ledger's lock is held.
func (w *world) orphanAnswer(m *msgRec) bool {
	if m.Kind != kindAnswer {
		return false
	}
	a := w.acct.asks[strings.TrimPrefix(m.ID, "answer:")]
	if a == nil {
		return true
	}
	gid, alive := w.ents[a.Asker].state()
	return !alive || gid != a.AskerGID
}

// deadLetters is the union of every running gateway's dead-letter log.
func (w *world) deadLetters() map[string]bool {
	out := map[string]bool{}
	for _, g := range w.gws {
		core, _, up := g.snapshot()
		if !up {
			continue
		}
		recs, err := core.DeadLetters(0)
		if err != nil {
			continue
		}
		for _, d := range recs {
			out[d.MsgID] = true
		}
	}
	return out
}

// String is the report as a failing test prints it: the seed, the
// command that replays it, the schedule, and each breach.
func (r *Report) String() string {
	var b strings.Builder
	s := r.Schedule
	fmt.Fprintf(&b, "seed %d: %d hosts, faults %s, %d steps, settled=%v\n", s.Seed, s.Hosts, faultList(s.Faults), len(s.Steps), r.Settled)
	fmt.Fprintf(&b, "replay: %s\n", ReplayCommand(s))
	keys := make([]string, 0, len(r.Breaches))
	for k := range r.Breaches {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "BREACH %s: %d\n", k, len(r.Breaches[k]))
		for i, v := range r.Breaches[k] {
			if i == 10 {
				fmt.Fprintf(&b, "  … and %d more\n", len(r.Breaches[k])-i)
				break
			}
			fmt.Fprintf(&b, "  %s\n", v)
		}
	}
	fmt.Fprintf(&b, "counts: %v\n", r.Counts)
	if len(r.Ghosts) > 0 {
		fmt.Fprintf(&b, "ghosts (delivered, no call accepted them): %d\n", len(r.Ghosts))
	}
	b.WriteString("schedule:\n")
	for _, st := range s.Steps {
		fmt.Fprintf(&b, "  %s\n", st)
	}
	return b.String()
}

func faultList(fs []Fault) string {
	if len(fs) == 0 {
		return "none"
	}
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = string(f)
	}
	return strings.Join(parts, ",")
}

// ReplayCommand is the one command that runs s again.
func ReplayCommand(s Schedule) string {
	if s.Scenario != "" {
		return fmt.Sprintf("go test ./sim -run 'TestSimScenarios/%s' -v -sim.strict", strings.ReplaceAll(s.Scenario, " ", "_"))
	}
	return fmt.Sprintf("go test ./sim -run 'TestSim$' -v -sim.seed=%d -sim.faults=%s -sim.rounds=%d", s.Seed, faultList(s.Faults), roundsOf(s))
}

func roundsOf(s Schedule) int {
	if len(s.Steps) == 0 {
		return 0
	}
	return s.Steps[len(s.Steps)-1].Index + 1
}
