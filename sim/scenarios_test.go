package sim_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/herdbridge/herdbridge/sim"
)

// scenario is a hand-written schedule that pins one finding of the random
// runs, so it reproduces every time.
type scenario struct {
	name  string
	hosts int
	disk  bool // needs a disk that can fill up (tmpfs, root)
	steps [][]sim.Action
	// brokenOnMain are the breaches main commits here: the test skips
	// (saying so) while it commits no others, and -sim.strict fails on
	// them. Clear them as the fixes are merged.
	brokenOnMain []string
}

func (sc scenario) schedule() sim.Schedule {
	s := sim.Schedule{Scenario: sc.name, Seed: 1, Hosts: sc.hosts}
	if sc.disk {
		s.Faults = []sim.Fault{"disk"}
	}
	for i, as := range sc.steps {
		s.Steps = append(s.Steps, sim.Step{Index: i, Actions: as})
	}
	return s
}

var scenarios = []scenario{
	{
		// herdbridge remove (Core.Remove) of a pull worker holding briefs:
		// they are dropped with the inbox, no FAILED, no dead-letter record
		name: "remove with briefs held", hosts: 1,
		steps: [][]sim.Action{
			{{Op: sim.OpSend, Actor: "p0", Target: "w0", N: 3}},
			{{Op: sim.OpPause, N: 2}}, // past SpillDelay: held in the store
			{{Op: sim.OpRemove, Host: 0, Target: "w0"}},
		},
	},
	{
		// a pane closes with briefs in its queue: FAILED to the sender, but
		// no dead-letter record
		name: "pane closed with briefs queued", hosts: 1,
		steps: [][]sim.Action{
			{{Op: sim.OpHerdrDown, Host: 0}},
			{{Op: sim.OpSend, Actor: "p0", Target: "pw0", N: 2}},
			{{Op: sim.OpPaneClose, Host: 0, Target: "pw0"}},
		},
	},
	{
		// a brief for a pane worker whose gateway is cut from the broker,
		// past the receipt bound: its sender's gateway used to report it
		// FAILED ("probably not typed"), and it was typed when the link
		// returned. Now the worker's gateway decides (GIVE_UP): one fate
		name: "brief across a cut link", hosts: 2,
		steps: [][]sim.Action{
			{{Op: sim.OpCut, Host: 1}},
			{{Op: sim.OpSend, Actor: "p0", Target: "pw1", N: 1}},
			{{Op: sim.OpPause, N: 30}}, // past InjectWait + ReceiptWait
			{{Op: sim.OpPoll, Actor: "p0"}},
		},
	},
	{
		// a pane closes with briefs from another host queued while its
		// gateway is cut from the broker: the FAILED for each could not be
		// published and was lost, so its sender heard nothing (seed
		// 3101738088149954073 under cut,pane). Now a notice the transport
		// refuses is kept and published again (bridge/noticeretry.go), and
		// on the split transport it waits in the outbox
		name: "pane closed across a cut link", hosts: 2,
		steps: [][]sim.Action{
			{{Op: sim.OpHerdrDown, Host: 0}},
			{{Op: sim.OpSend, Actor: "p1", Target: "pw0", N: 3}},
			{{Op: sim.OpCut, Host: 0}},
			{{Op: sim.OpPaneClose, Host: 0, Target: "pw0"}},
			{{Op: sim.OpPause, N: 5}},
		},
	},
	{
		// reaping on a full disk: the senders are told FAILED, but the
		// dead-letter records cannot be written
		name: "reap on a full disk", hosts: 1, disk: true,
		steps: [][]sim.Action{
			{{Op: sim.OpSend, Actor: "p0", Target: "w0", N: 3}},
			{{Op: sim.OpDiskFull, Host: 0}},
			{{Op: sim.OpReap}},
		},
	},
	{
		// the FAILEDs of a removed worker's sends, held for their sender and
		// not yet spilled, across a restart of the sender's gateway: the
		// copies the restart hands back were dropped as seen (sends lost)
		name: "failed held across a restart", hosts: 1,
		steps: [][]sim.Action{
			{{Op: sim.OpSend, Actor: "p0", Target: "w0", N: 3}},
			{{Op: sim.OpRemove, Host: 0, Target: "w0"}},
			{{Op: sim.OpRestart, Host: 0}}, // within SpillDelay of the FAILEDs' arrival
		},
	},
	{
		// the same without a fault: delivered, once
		name: "baseline", hosts: 2,
		steps: [][]sim.Action{
			{{Op: sim.OpSend, Actor: "p0", Target: "w1", N: 3}, {Op: sim.OpSend, Actor: "p1", Target: "pw0", N: 2}},
			{{Op: sim.OpPoll, Actor: "w1"}, {Op: sim.OpReply, Actor: "w1", Target: "p0", N: 2}},
		},
	},
}

// TestSimScenarios runs each hand-written schedule and checks the
// invariant; a scenario main is known to break skips while it still does.
func TestSimScenarios(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			s := sc.schedule()
			disks := disksFor(t, &s)
			if sc.disk && !slices.Contains(s.Faults, "disk") {
				t.Skip("needs a disk that can fill up (tmpfs: run as root)")
			}
			rep, err := sim.Run(s, disks, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !*strictFlag {
				var still []string
				for _, k := range sc.brokenOnMain {
					if v := rep.Breaches[k]; len(v) > 0 {
						still = append(still, fmt.Sprintf("%d %q, e.g. %s", len(v), k, v[0]))
						delete(rep.Breaches, k)
					}
				}
				if len(still) > 0 && rep.OK() {
					t.Skipf("known bug, still there (-sim.strict fails on it): %s", strings.Join(still, "; "))
				}
			}
			if !rep.OK() {
				t.Errorf("%s", rep)
			}
		})
	}
}
