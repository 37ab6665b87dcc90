package bridge_test

import (
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/herdbridge/herdbridge/bridge"
)

// recorder is an Observer that keeps every event.
type recorder struct {
	mu sync.Mutex
	ev []bridge.Event
}

func (r *recorder) Observe(e bridge.Event) {
	r.mu.Lock()
	r.ev = append(r.ev, e)
	r.mu.Unlock()
}

// hops lists the hops recorded for msgID in time order (a publish is
// stamped with the message's ts, but told after the transport returns:
// the receiving side may be told first).
func (r *recorder) hops(msgID string) []string {
	r.mu.Lock()
	var evs []bridge.Event
	for _, e := range r.ev {
		if e.MsgID == msgID {
			evs = append(evs, e)
		}
	}
	r.mu.Unlock()
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].At.Before(evs[j].At) })
	var out []string
	for _, e := range evs {
		out = append(out, string(e.Hop)+":"+e.Status)
	}
	return out
}

// TestObserverSeesEveryHop: a brief held for a pull worker goes publish →
// accept → hold → drain, each hop with its ids, and the drain measures
// the time since the publish.
func TestObserverSeesEveryHop(t *testing.T) {
	rec := &recorder{}
	h := newHarness(t, func(c *bridge.Config) { c.Observer = rec })
	p := h.reg("lead", bridge.RolePrimary)
	w := h.reg("w1", bridge.RoleWorker)
	res := h.send(p, bridge.SendRequest{Target: "w1", Message: "brief one"})
	h.heldFor("w1", 1)
	got := h.poll(w, bridge.PollRequest{})
	if len(bodies(got)) != 1 {
		t.Fatalf("poll: %+v", got)
	}
	want := []string{"publish:published", "accept:accepted", "hold:held", "drain:drained"}
	eventually(t, "every hop observed", func() bool { return strings.Join(rec.hops(res.MsgID), " ") == strings.Join(want, " ") })
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, e := range rec.ev {
		if e.MsgID != res.MsgID {
			continue
		}
		if e.TraceID == "" || e.From != p.GID || e.To != w.GID || e.Kind != bridge.KindSend || e.At.IsZero() {
			t.Errorf("%s: %+v", e.Hop, e)
		}
		if (e.Hop == bridge.HopHold || e.Hop == bridge.HopDrain) && e.Entity != w.GID {
			t.Errorf("%s: entity %q, want the worker", e.Hop, e.Entity)
		}
		if e.Hop == bridge.HopDrain && e.Latency <= 0 {
			t.Errorf("drain latency %v", e.Latency)
		}
	}
}
