package gateway_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// TestBrokerOutageBounded: the broker application is stopped during
// traffic (3 s here; HB_OUTAGE=30s for the figure of the issue). Sends
// between two entities of host A keep working through the outage, sends
// from A to host B return within the publish bound, queued, saying the
// broker is down, and once the broker is back every accepted message
// reaches its recipient exactly once.
func TestBrokerOutageBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("stops the broker")
	}
	outage := 3 * time.Second
	if v := os.Getenv("HB_OUTAGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("HB_OUTAGE=%q: %v", v, err)
		}
		outage = d
	}
	url := brokerURL(t)
	rmqctl(t, "status") // fail fast without a controllable node
	const bound = 5 * time.Second
	tune := func(c *gateway.Config) { c.BrokerWait = bound }
	ga := gatewaytest.StartHost(t, gatewaytest.UniqueHost("oa"), url, tune)
	gb := gatewaytest.StartHost(t, gatewaytest.UniqueHost("ob"), url, tune)
	w := gatewaytest.RegisterOn(t, ga, "w", bridge.RoleWorker)
	lead := gatewaytest.RegisterOn(t, ga, "lead", bridge.RolePrimary)
	far := gatewaytest.RegisterOn(t, gb, "far", bridge.RolePrimary)
	farAddr := "far@" + gb.Host()
	gatewaytest.Eventually(t, 10*time.Second, "A sees far", func() bool { _, err := ga.Core().Resolve(farAddr); return err == nil })

	var phase atomic.Int32 // 0 before, 1 broker down, 2 back
	local := newSendLog()
	cross := newSendLog()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	sender := func(log *sendLog, target, prefix string, gap time.Duration) {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			body := fmt.Sprintf("%s%05d", prefix, i)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			p := phase.Load()
			start := time.Now()
			res, err := ga.Core().Send(ctx, w.GID, bridge.SendRequest{Target: target, Message: body}, nil)
			cancel()
			log.add(p, body, time.Since(start), res, err)
			time.Sleep(gap)
		}
	}
	wg.Add(2)
	go sender(local, "lead", "l", 5*time.Millisecond)
	go sender(cross, farAddr, "c", 5*time.Millisecond)
	time.Sleep(time.Second)
	phase.Store(1)
	rmqctl(t, "stop_app")
	downAt := time.Now()
	lateStart := time.Now()
	late := gatewaytest.RegisterOn(t, ga, "late", bridge.RolePrimary) // registering needs no broker
	lateReg := time.Since(lateStart)
	if _, err := ga.Core().Send(context.Background(), w.GID, bridge.SendRequest{Target: "late", Message: "hello late"}, nil); err != nil {
		t.Errorf("send to an entity registered during the outage: %v", err)
	}
	time.Sleep(max(0, outage-time.Since(downAt)))
	rmqctl(t, "start_app")
	down := time.Since(downAt)
	upAt := time.Now()
	phase.Store(2)
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	spooled := ga.Outbox()
	gatewaytest.Eventually(t, 60*time.Second, "A's outbox drained", func() bool { return ga.Outbox() == 0 })
	drained := time.Since(upAt)

	got := map[string]int{}
	drain(t, ga, lead.GID, got, local.accepted())
	drain(t, gb, far.GID, got, cross.accepted())
	drain(t, ga, late.GID, got, []string{"hello late"})
	if got["hello late"] != 1 {
		t.Errorf("the entity registered during the outage got %d copies of its message", got["hello late"])
	}
	t.Logf("registering an entity while the broker was down took %v; %d messages still in the outbox when the senders stopped, empty %.1fs after start_app", lateReg, spooled, drained.Seconds())
	lost, dups := 0, 0
	for _, b := range append(local.accepted(), cross.accepted()...) {
		switch got[b] {
		case 0:
			lost++
		case 1:
		default:
			dups++
		}
	}
	p50Before, p50Down := local.p50(0), local.p50(1)
	ratio := float64(p50Down) / float64(max(p50Before, time.Microsecond))
	t.Logf("broker down %.1fs: same-host sends %d before (p50 %v), %d during (p50 %v, ratio %.2f), %d failed; cross-host sends during: %d, statuses %v, slowest return %v; accepted %d+%d, lost %d, duplicated %d",
		down.Seconds(), local.count(0), p50Before, local.count(1), p50Down, ratio, local.failures(),
		cross.count(1), cross.statuses(1), cross.slowest(1), len(local.accepted()), len(cross.accepted()), lost, dups)
	if n := local.failures(); n > 0 {
		t.Errorf("%d same-host sends failed (first: %v)", n, local.firstErr())
	}
	if local.count(1) == 0 {
		t.Error("no same-host send completed while the broker was down")
	}
	if cross.count(1) == 0 {
		t.Fatal("no cross-host send was made while the broker was down")
	}
	// the bound is the product's promise; the slack is for a loaded machine
	if s := cross.slowest(1); s > 3*bound {
		t.Errorf("a cross-host send took %v while the broker was down, past the %v bound", s, bound)
	}
	if st := cross.statuses(1); st[bridge.StatusQueued] == 0 || len(st) > 2 {
		t.Errorf("cross-host sends while the broker was down: %v, want queued (and confirmed for those before it was seen down)", st)
	}
	if r := cross.reason(bridge.StatusQueued); !strings.Contains(r, "broker is unreachable") {
		t.Errorf("a queued send's reason %q does not say the broker is down", r)
	}
	if n := cross.failures(); n > 0 {
		t.Errorf("%d cross-host sends failed (first: %v)", n, cross.firstErr())
	}
	if lost != 0 || dups != 0 {
		t.Fatalf("%d accepted messages lost, %d duplicated", lost, dups)
	}
}

// drain polls gid on g until every body of want arrived (or a deadline),
// counting each message received in got.
func drain(t *testing.T, g *gateway.Gateway, gid string, got map[string]int, want []string) {
	t.Helper()
	missing := func() int {
		n := 0
		for _, b := range want {
			if got[b] == 0 {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(60 * time.Second)
	for missing() > 0 && time.Now().Before(deadline) {
		r, err := g.Core().Poll(context.Background(), gid, bridge.PollRequest{Max: 500, Wait: time.Second}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range r.Messages {
			got[m.Body]++
		}
	}
	// whatever else is held now would be a duplicate
	r, err := g.Core().Poll(context.Background(), gid, bridge.PollRequest{Max: 500, Wait: 500 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range r.Messages {
		got[m.Body]++
	}
}

// sendLog is what one sender saw, by phase.
type sendLog struct {
	mu       sync.Mutex
	lat      [3][]time.Duration
	status   [3]map[string]int
	reasons  map[string]string
	ok       []string
	failed   int
	firstBad error
}

func newSendLog() *sendLog {
	l := &sendLog{reasons: map[string]string{}}
	for i := range l.status {
		l.status[i] = map[string]int{}
	}
	return l
}

func (l *sendLog) add(phase int32, body string, d time.Duration, res *bridge.Result, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.failed++
		if l.firstBad == nil {
			l.firstBad = err
		}
		return
	}
	l.lat[phase] = append(l.lat[phase], d)
	l.status[phase][res.Status]++
	l.reasons[res.Status] = res.Reason
	l.ok = append(l.ok, body)
}

func (l *sendLog) accepted() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ok...)
}

func (l *sendLog) count(phase int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lat[phase])
}

func (l *sendLog) p50(phase int) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := slices.Clone(l.lat[phase])
	if len(s) == 0 {
		return 0
	}
	slices.Sort(s)
	return s[len(s)/2]
}

func (l *sendLog) slowest(phase int) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lat[phase]) == 0 {
		return 0
	}
	return slices.Max(l.lat[phase])
}

func (l *sendLog) statuses(phase int) map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for k, v := range l.status[phase] {
		out[k] = v
	}
	return out
}

func (l *sendLog) reason(status string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reasons[status]
}

func (l *sendLog) failures() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed
}

func (l *sendLog) firstErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.firstBad
}

// TestBrokerOutageFailModeAndExpiry: in fail mode a cross-host send fails
// within the bound saying the broker is unreachable; in spool mode a
// spooled message that expires before the broker returns is reported
// FAILED to its sender, held for it, not lost in silence.
func TestBrokerOutageFailModeAndExpiry(t *testing.T) {
	if testing.Short() {
		t.Skip("stops the broker")
	}
	url := brokerURL(t)
	rmqctl(t, "status")
	gf := gatewaytest.StartHost(t, gatewaytest.UniqueHost("of"), url, func(c *gateway.Config) {
		c.BrokerOutage, c.BrokerWait = "fail", time.Second
	})
	gs := gatewaytest.StartHost(t, gatewaytest.UniqueHost("os"), url, func(c *gateway.Config) {
		c.Core.MessageTTL = 2 * time.Second
	})
	gb := gatewaytest.StartHost(t, gatewaytest.UniqueHost("ot"), url)
	wf := gatewaytest.RegisterOn(t, gf, "wf", bridge.RoleWorker)
	ws := gatewaytest.RegisterOn(t, gs, "ws", bridge.RolePrimary)
	gatewaytest.RegisterOn(t, gb, "far", bridge.RolePrimary)
	farAddr := "far@" + gb.Host()
	for _, g := range []*gateway.Gateway{gf, gs} {
		gatewaytest.Eventually(t, 10*time.Second, g.Host()+" sees far", func() bool { _, err := g.Core().Resolve(farAddr); return err == nil })
	}
	rmqctl(t, "stop_app")
	t.Cleanup(func() { rmqctl(t, "start_app") })
	ctx := context.Background()

	start := time.Now()
	_, err := gf.Core().Send(ctx, wf.GID, bridge.SendRequest{Target: farAddr, Message: "fail me"}, nil)
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Errorf("fail mode, broker down: %v, want an error saying the broker is unreachable", err)
	}
	if took > 10*time.Second {
		t.Errorf("fail mode took %v, bound 1s", took)
	}
	t.Logf("fail mode: %v after %v", err, took)

	res, err := gs.Core().Send(ctx, ws.GID, bridge.SendRequest{Target: farAddr, Message: "expire me"}, nil)
	if err != nil || res.Status != bridge.StatusQueued {
		t.Fatalf("spool mode, broker down: %+v, %v; want queued", res, err)
	}
	var failed *bridge.Message
	for deadline := time.Now().Add(20 * time.Second); failed == nil && time.Now().Before(deadline); {
		r, err := gs.Core().Poll(ctx, ws.GID, bridge.PollRequest{Max: 10, Wait: time.Second}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range r.Messages {
			if m.Kind == bridge.KindFailed && m.Corr == res.MsgID {
				failed = &r.Messages[i]
			}
		}
	}
	if failed == nil {
		t.Fatal("the spooled message expired without a FAILED for its sender")
	}
	t.Logf("expired in the outbox: FAILED %q", failed.Body)
}
