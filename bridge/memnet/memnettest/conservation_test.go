package memnettest_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/memnet/memnettest"
)

// TestStopAcrossHostsWhileSendersSend: senders on hosts a and c keep
// sending to a worker on b, which holds a backlog, while a primary on a
// stops it over b's control queue. Every send either host accepted ends in
// exactly one fate its sender sees — here all are reported FAILED (the
// worker drained nothing), by b's gateway, across the network — and the
// sends after the worker's inbox closed are refused at once, never
// accepted into it (issue 20, removal.go).
func TestStopAcrossHostsWhileSendersSend(t *testing.T) {
	cl := memnettest.New(t)
	a, b, c := cl.Start("a"), cl.Start("b"), cl.Start("c")
	lead := a.Register(t, "lead", bridge.RolePrimary)
	b.Register(t, "w", bridge.RoleWorker)
	senders := []struct {
		h *memnettest.Host
		e bridge.Entity
	}{{a, a.Register(t, "sa", bridge.RolePrimary)}, {c, c.Register(t, "sc", bridge.RolePrimary)}}
	cl.Converge(t)

	var mu sync.Mutex
	accepted := map[string]bridge.Entity{} // msgId -> sender
	enough := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for _, s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				res, err := s.h.Core.Send(ctx, s.e.GID, bridge.SendRequest{Target: "w@b", Message: fmt.Sprintf("%s-%d", s.e.Name, n)}, nil)
				if err != nil {
					return // refused: the worker is gone (unknown, or its inbox closed)
				}
				mu.Lock()
				accepted[res.MsgID] = s.e
				if len(accepted) >= 100 {
					once.Do(func() { close(enough) })
				}
				mu.Unlock()
			}
		}()
	}
	<-enough
	if _, err := a.Core.Stop(ctx, lead.GID, bridge.StopRequest{Target: "w@b", Reason: "done"}); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	wg.Wait()

	reported := map[string]int{}
	deadline := time.Now().Add(memnettest.Timeout)
	for len(reported) < len(accepted) && time.Now().Before(deadline) {
		for _, s := range senders {
			r, err := s.h.Core.Poll(ctx, s.e.GID, bridge.PollRequest{Wait: 100 * time.Millisecond, Max: 500}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range r.Messages {
				if m.Kind == bridge.KindFailed {
					reported[m.Corr]++
				}
			}
		}
	}
	var none, twice int
	for id := range accepted {
		switch reported[id] {
		case 0:
			none++
		case 1:
		default:
			twice++
		}
	}
	t.Logf("accepted %d, reported %d", len(accepted), len(reported))
	if none > 0 || twice > 0 {
		t.Fatalf("of %d accepted sends %d got no fate and %d were reported more than once", len(accepted), none, twice)
	}
}
