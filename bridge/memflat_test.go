package bridge_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/embedded"
)

// liveHeap is the heap still reachable after a full collection.
func liveHeap() uint64 {
	var ms runtime.MemStats
	for range 3 {
		runtime.GC()
	}
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestSendDrainHeapFlat: messages sent without a request_id and drained
// leave nothing behind per message in the live heap. The seen-set (one
// entry per message, up to SeenSize) used to keep each gid+msgId string,
// ~96 B a message until its bound; it keeps a fixed-size digest in slots
// allocated once.
func TestSendDrainHeapFlat(t *testing.T) {
	c := startCore(t, func(*bridge.Config, *embedded.Transport) {})
	ctx := context.Background()
	lead, _, _ := c.Register(ctx, bridge.RegisterRequest{Name: "lead", Role: bridge.RolePrimary})
	w, _, err := c.Register(ctx, bridge.RegisterRequest{Name: "w", Role: bridge.RoleWorker})
	if err != nil {
		t.Fatal(err)
	}
	round := func(n int) {
		for i := range n {
			if _, err := c.Send(ctx, w.GID, bridge.SendRequest{Target: "lead", Message: fmt.Sprintf("m %d", i)}, nil); err != nil {
				t.Fatal(err)
			}
			for got := 0; got == 0; {
				r, err := c.Poll(ctx, lead.GID, bridge.PollRequest{Max: 10}, nil)
				if err != nil {
					t.Fatal(err)
				}
				got = len(r.Messages)
			}
		}
	}
	n := 3000
	if raceEnabled {
		n = 1500
	}
	// Each measurement waits out what is in flight by design — the last
	// second's publishes and acks before their journal commit
	// (journalApplyDelay, 1 s), messages queued for the spiller
	// (SpillDelay) — which a measurement taken at once caught as up to
	// ±500 KiB. The warm-up fills pools, maps and the transport's pages.
	// Before the spiller cleared the slots it took (spill.go's take), a
	// window here read +577 KiB after 1,000 messages and +672 after
	// 12,000: its queue's array kept the last second's messages.
	settle := func() uint64 {
		time.Sleep(1500 * time.Millisecond)
		return liveHeap()
	}
	round(n)
	h0 := settle()
	round(n)
	h1 := settle()
	perMsg := (float64(h1) - float64(h0)) / float64(n)
	t.Logf("%d messages sent and drained: live heap %d → %d KiB, %.1f B a message", n, h0>>10, h1>>10, perMsg)
	if perMsg > 32 { // a gid+msgId string alone is 80 B
		t.Errorf("the live heap grows %.0f B a message sent and drained: it must stay flat", perMsg)
	}
}
