package bridge_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/embedded"
)

// BenchmarkCoreSendDrainRequestID is BenchmarkCoreSendDrain's nosync
// variant with a new request_id on every send, as the stdio relay gives
// them: what recording the id costs the send path (its intent and its
// record, two journal writes, no fsync). Compare with
// BenchmarkCoreSendDrain/nosync.
func BenchmarkCoreSendDrainRequestID(b *testing.B) {
	const body = "done: built the thing, 3 files changed, tests pass"
	c, lead, worker := benchCore(b, embedded.Options{NoSync: true})
	ctx := context.Background()
	n := 0
	iter := func() {
		n++
		res, err := c.Send(ctx, worker.GID, bridge.SendRequest{Target: "lead", Message: body, RequestID: "bench-" + strconv.Itoa(n)}, nil)
		if err != nil || res.Status != bridge.StatusConfirmed {
			b.Fatalf("send: %+v, %v", res, err)
		}
		res, err = c.Poll(ctx, lead.GID, bridge.PollRequest{Wait: 5 * time.Second}, nil)
		if err != nil || res.Status != bridge.StatusDrained || len(res.Messages) != 1 {
			b.Fatalf("poll: %+v, %v", res, err)
		}
	}
	for range 3 {
		iter()
	}
	b.ReportAllocs()
	for b.Loop() {
		iter()
	}
}
