package bridge_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/embedded"
	"github.com/herdbridge/herdbridge/bridge/store"
)

// benchCore is a started Core on the embedded transport in b's temp dir,
// with a primary "lead" and a worker "w" registered. Everything else is the
// production default (prefetch 1024, caps, TTLs, a discarding logger).
func benchCore(b *testing.B, opts embedded.Options) (c *bridge.Core, lead, worker bridge.Entity) {
	b.Helper()
	return benchCoreWith(b, opts, nil)
}

// benchCoreWith is benchCore with its Config changed by mod first.
func benchCoreWith(b *testing.B, opts embedded.Options, mod func(*bridge.Config)) (c *bridge.Core, lead, worker bridge.Entity) {
	b.Helper()
	dir := b.TempDir()
	tr, err := embedded.Open(filepath.Join(dir, "transport.db"), opts)
	if err != nil {
		b.Fatal(err)
	}
	st, err := store.Open(filepath.Join(dir, "state.db"), 0)
	if err != nil {
		tr.Close()
		b.Fatal(err)
	}
	cfg := bridge.Config{Host: "bench", Transport: tr, Store: st}
	if mod != nil {
		mod(&cfg)
	}
	c, err = bridge.New(cfg)
	if err != nil {
		st.Close()
		tr.Close()
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		st.Close()
		tr.Close()
		b.Fatal(err)
	}
	b.Cleanup(func() {
		c.Close()
		st.Close()
		tr.Close()
	})
	if lead, _, err = c.Register(ctx, bridge.RegisterRequest{Name: "lead", Role: bridge.RolePrimary}); err != nil {
		b.Fatal(err)
	}
	if worker, _, err = c.Register(ctx, bridge.RegisterRequest{Name: "w", Role: bridge.RoleWorker}); err != nil {
		b.Fatal(err)
	}
	return c, lead, worker
}

// sendDrain is one iteration: the worker sends a REPLY to the primary (a
// pull entity: it is held) and the primary's poll drains it. The poll long-
// polls because delivery into the held set is asynchronous (the transport's
// consumer goroutine); it returns as soon as the reply is there.
func sendDrain(b *testing.B, c *bridge.Core, lead, worker bridge.Entity, body string) {
	ctx := context.Background()
	res, err := c.Send(ctx, worker.GID, bridge.SendRequest{Target: "lead", Message: body}, nil)
	if err != nil {
		b.Fatal(err)
	}
	if res.Status != bridge.StatusConfirmed {
		b.Fatalf("send: %+v", res)
	}
	res, err = c.Poll(ctx, lead.GID, bridge.PollRequest{Wait: 5 * time.Second}, nil)
	if err != nil {
		b.Fatal(err)
	}
	if res.Status != bridge.StatusDrained || len(res.Messages) != 1 {
		b.Fatalf("poll: status %s, %d messages", res.Status, len(res.Messages))
	}
}

// BenchmarkCoreSendDrain is the core's cost of one reply without MCP:
// Send (publish, durable) then Poll (delivery to the held set, claim, ack).
// fsync is the default store; nosync shows how much of it is the fsync
// (embedded.Options.NoSync: commits are not fsynced).
func BenchmarkCoreSendDrain(b *testing.B) {
	const body = "done: built the thing, 3 files changed, tests pass"
	for _, v := range []struct {
		name string
		opts embedded.Options
	}{
		{"fsync", embedded.Options{}},
		{"nosync", embedded.Options{NoSync: true}},
	} {
		b.Run(v.name, func(b *testing.B) {
			c, lead, worker := benchCore(b, v.opts)
			for range 3 { // warm up: first commits grow the file and the page cache
				sendDrain(b, c, lead, worker, body)
			}
			b.ReportAllocs()
			for b.Loop() {
				sendDrain(b, c, lead, worker, body)
			}
		})
	}
}

// BenchmarkSendDrainHistory is BenchmarkCoreSendDrain (nosync, so the
// history's own cost is not hidden behind the fsync) with every entity's
// history off and on: the send path only queues a record, so the two
// should be close.
func BenchmarkSendDrainHistory(b *testing.B) {
	const body = "done: built the thing, 3 files changed, tests pass"
	for _, on := range []bool{false, true} {
		name := map[bool]string{false: "off", true: "on"}[on]
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			c, lead, worker := benchCoreWith(b, embedded.Options{NoSync: true}, func(cfg *bridge.Config) {
				if on {
					cfg.History = bridge.HistoryConfig{Dir: filepath.Join(dir, "history"), All: true}
				}
			})
			for range 3 {
				sendDrain(b, c, lead, worker, body)
			}
			b.ReportAllocs()
			for b.Loop() {
				sendDrain(b, c, lead, worker, body)
			}
		})
	}
}
