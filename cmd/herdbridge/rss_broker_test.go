package main

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker"
	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/keys"
)

// BenchmarkGatewayRSS100kBacklog: a gateway process on the broker whose
// primary has 100k unread messages queued. The prefetch bound keeps the
// backlog on the broker: the gateway holds 1024. Reports the gateway's
// RSS against its idle RSS in the same run (target < 64 MiB).
func BenchmarkGatewayRSS100kBacklog(b *testing.B) {
	url := brokerURL(b)
	const n = 100000
	var once sync.Once
	for b.Loop() {
		once.Do(func() {
			bin := buildBinary(b)
			dir := gatewaytest.TempDir(b)
			if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"inboxMaxLength": 200000, "herdr": {"disabled": true}}`), 0o600); err != nil {
				b.Fatal(err)
			}
			// the filler signs as host "bench", which the gateway trusts
			bk, _, err := keys.LoadOrCreate(gatewaytest.TempDir(b), "bench")
			if err != nil {
				b.Fatal(err)
			}
			if err := keys.Trust(filepath.Join(dir, keys.TrustFile), "bench", bk.Public()); err != nil {
				b.Fatal(err)
			}
			gp := startGatewayProcArgs(b, bin, dir, gatewaytest.UniqueHost("rss"), "--broker", url)
			c, _, r, err := gateway.Dial(dir, gateway.Request{Op: "register", Name: "lead", Role: "primary"})
			if err != nil {
				b.Fatal(err)
			}
			c.Close()
			gid := r.Entity.GID
			time.Sleep(time.Second)
			idle := rssProcStatus(b, gp.cmd.Process.Pid)

			ctx := context.Background()
			tr, err := broker.Open(ctx, broker.Options{URL: url})
			if err != nil {
				b.Fatal(err)
			}
			defer tr.Close()
			from := bridge.GatewayGID("bench") // lives on host bench without presence; a gateway sends FAILEDs
			body := []byte("done: built the thing, 3 files changed, tests pass — a reply of ordinary size for a coding agent to read later")
			var next atomic.Int64
			var wg sync.WaitGroup
			start := time.Now()
			for k := 0; k < 64; k++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= n {
						now := time.Now()
						env := &bridge.Envelope{V: bridge.Version, Kind: bridge.KindFailed, Corr: uuid.NewString(), MsgID: uuid.NewString(), From: from, To: gid,
							Host: "bench", TS: now, ExpiresAt: now.Add(time.Hour), Body: body}
						env.Sig = bk.Sign(env.SigningInput())
						if err := tr.Publish(ctx, gid, env, true); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			fill := time.Since(start)
			rssWaitHeld(b, dir, "lead", 1024)
			time.Sleep(2 * time.Second) // let the GC settle after the burst
			m := rssProcStatus(b, gp.cmd.Process.Pid)
			b.ReportMetric(idle.rss, "idle-RSS-MiB")
			b.ReportMetric(m.rss, "backlog100k-RSS-MiB")
			b.ReportMetric(m.hwm, "peak-RSS-MiB")
			b.ReportMetric(m.rss/idle.rss, "RSS-ratio")
			b.ReportMetric(fill.Seconds(), "fill-s")
			gp.kill()
			// the backlog is the broker's to drop: delete the inbox queue
			_ = tr.DeleteInbox(ctx, gid)
		})
	}
}
