package attacktest

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// legitSender replies from w to lead, at the harness's pace, until
// stopped: legitimate traffic all along the attack.
type legitSender struct {
	quit chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	n    int
}

func (a *attack) startLegit() *legitSender {
	l := &legitSender{quit: make(chan struct{})}
	l.wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-l.quit:
				return
			default:
			}
			if _, err := a.d.B.Send(context.Background(), a.w.GID, bridge.SendRequest{Target: a.target, Message: fmt.Sprintf("legit-%05d", i)}, nil); err != nil {
				a.t.Errorf("legit send: %v", err)
				return
			}
			l.mu.Lock()
			l.n++
			l.mu.Unlock()
			time.Sleep(a.h.Pace) // a pace, not a wait
		}
	})
	return l
}

func (l *legitSender) stop() { close(l.quit); l.wg.Wait() }

func (l *legitSender) sent() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// drainer polls lead's and other's held messages, as primaries would, and
// counts them by body; anything but w's legit replies is an attack that
// reached an entity.
type drainer struct {
	quit chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	got  map[string]int // legit replies of w, by body
	bad  []string       // whatever else arrived
}

func (a *attack) startDrain() *drainer {
	d := &drainer{quit: make(chan struct{}), got: map[string]int{}}
	d.wg.Go(func() {
		for {
			select {
			case <-d.quit:
				return
			default:
			}
			if !d.poll(a, a.lead.GID, 50*time.Millisecond) || !d.poll(a, a.other.GID, 0) {
				return
			}
		}
	})
	return d
}

func (d *drainer) poll(a *attack, gid string, wait time.Duration) bool {
	r, err := a.d.A.Poll(context.Background(), gid, bridge.PollRequest{Max: 500, Wait: wait}, nil)
	if err != nil {
		a.t.Errorf("poll: %v", err)
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, m := range r.Messages {
		if strings.HasPrefix(m.Body, "legit-") && m.From == a.w.GID && gid == a.lead.GID {
			d.got[m.Body]++
		} else {
			d.bad = append(d.bad, fmt.Sprintf("%s %s from %s: %.60q", gid, m.Kind, m.From, m.Body))
		}
	}
	return true
}

func (d *drainer) stop() { close(d.quit); d.wg.Wait() }

func (d *drainer) snapshot() (map[string]int, []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.got), append([]string(nil), d.bad...)
}

// until waits for n distinct legit replies.
func (d *drainer) until(a *attack, n int) {
	a.t.Helper()
	a.eventually(fmt.Sprintf("%d legit replies drained", n), func() bool { got, _ := d.snapshot(); return len(got) >= n })
}

// checkDeliveries: nothing of the attack reached an entity; the legit
// traffic lost nothing and doubled nothing; no genuine heartbeat was
// refused as a replay.
func (a *attack) checkDeliveries(d *drainer, l *legitSender) {
	a.t.Helper()
	got, bad := d.snapshot()
	if len(bad) != 0 {
		a.t.Errorf("%d attack messages reached entities, e.g. %q", len(bad), bad[:min(5, len(bad))])
	}
	lost, dups := 0, 0
	for i := range l.sent() {
		switch got[fmt.Sprintf("legit-%05d", i)] {
		case 0:
			lost++
		case 1:
		default:
			dups++
		}
	}
	if lost != 0 || dups != 0 || l.sent() == 0 || len(got) != l.sent() {
		a.t.Errorf("legit traffic: %d sent, %d received, %d lost, %d duplicated", l.sent(), len(got), lost, dups)
	}
	a.t.Logf("attack over: %d legit replies meanwhile, none lost; refusals on A %v", l.sent(), a.d.A.Refused())
	if n, m := a.watchA.count(), a.watchB.count(); n+m != 0 {
		a.t.Errorf("genuine heartbeats refused as replays: %d by A, %d by B", n, m)
	}
}
