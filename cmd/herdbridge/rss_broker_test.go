package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
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

// BenchmarkGatewayRSSBacklog: a gateway process on the broker whose
// primary gets a backlog from one chatty sender, then one reply from a
// quiet worker. The gateway moves the backlog into its store (acking the
// broker only after the write), so memory holds a head per message, and
// bridge_poll(target=quiet) finds the reply behind it. Reports the
// gateway's RSS against its idle RSS in the same run and the time from the
// quiet reply's send to the filtered poll returning it.
func BenchmarkGatewayRSSBacklog(b *testing.B) {
	url := brokerURL(b)
	for _, tc := range []struct {
		name    string
		n, size int
	}{{"100k-1KiB", 100000, 1 << 10}, {"1100-256KiB", 1100, 256 << 10}} {
		b.Run(tc.name, func(b *testing.B) {
			var once sync.Once
			for b.Loop() {
				once.Do(func() { benchBacklog(b, url, tc.n, tc.size) })
			}
		})
	}
}

// releaseSettle is how long the benchmark lets the gateway sit after a
// burst: it releases the burst's memory 5 s after it (bridge/spill.go).
const releaseSettle = 7 * time.Second

func benchBacklog(b *testing.B, url string, n, size int) {
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
	lead := procConn(b, gp, "lead", "primary")
	quiet := procConn(b, gp, "quiet", "worker")
	time.Sleep(time.Second)
	idle := rssProcStatus(b, gp.cmd.Process.Pid)

	ctx := context.Background()
	tr, err := broker.Open(ctx, broker.Options{URL: url})
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	defer func() { _ = tr.DeleteInbox(ctx, gid) }() // what is left is the broker's to drop
	start := time.Now()
	fillBacklog(b, tr, bk, gid, n, size)
	fill := time.Since(start)
	rssWaitHeld(b, dir, "lead", n)
	held := time.Since(start)
	time.Sleep(releaseSettle) // the gateway gives a burst's memory back once it has been quiet that long
	m := rssProcStatus(b, gp.cmd.Process.Pid)

	t0 := time.Now()
	quiet.MustStatus("bridge_send", map[string]any{"target": "lead", "message": "the reply you want"}, "confirmed")
	got := lead.Call("bridge_poll", map[string]any{"target": "quiet", "wait_s": 10})
	pollDur := time.Since(t0)
	if len(got.Messages) != 1 || got.Messages[0].Body != "the reply you want" {
		b.Fatalf("poll(target=quiet) behind %d: %+v (%s)", n, got.Result, got.Text)
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(idle.rss, "idle-RSS-MiB")
	b.ReportMetric(m.rss, "held-RSS-MiB")
	b.ReportMetric(m.anon, "held-RssAnon-MiB")
	b.ReportMetric(m.file, "held-RssFile-MiB")
	b.ReportMetric(m.hwm, "peak-RSS-MiB")
	b.ReportMetric(m.rss/idle.rss, "RSS-ratio")
	b.ReportMetric(fill.Seconds(), "fill-s")
	b.ReportMetric(held.Seconds(), "all-held-s")
	b.ReportMetric(float64(pollDur.Microseconds())/1000, "quiet-poll-ms")
	gp.kill()
}

// fillBacklog publishes n messages of size bytes to gid's inbox, as a
// chatty sender on host "bench" would (FAILED notices from its gateway:
// held, and no presence needed).
func fillBacklog(b *testing.B, tr *broker.Transport, bk *keys.HostKey, gid string, n, size int) {
	ctx := context.Background()
	from := bridge.GatewayGID("bench")
	body := []byte(strings.Repeat("x", size))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
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
}
