package gateway_test

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker"
	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/keys"
)

// gatewayVariants are the gateway runs of the broker benchmarks, in one
// run so their ratios hold: signed with bodies clear (seal off: the P2/P3
// figure as before sealing), signed and sealed (the default since issue
// 23: HPKE per message on top), and unsigned (neither).
var gatewayVariants = []struct {
	name string
	tune func(*gateway.Config)
}{
	{"gateway", func(c *gateway.Config) { c.Seal = bridge.SealOff }},
	{"gateway-sealed", func(c *gateway.Config) { c.Seal = bridge.SealAuto }},
	{"gateway-unsigned", func(c *gateway.Config) { gateway.SetUnsigned(c, true) }},
}

// BenchmarkBrokerLatency compares a gateway-to-gateway reply (host A's
// worker sends, host B's primary has it) with raw amqp091-go on the same
// broker in the same run: persistent publish with confirm and mandatory,
// delivered to a manual-ack consumer. Target: gateway p50 ≤ 1.3× raw.
func BenchmarkBrokerLatency(b *testing.B) {
	url := brokerURL(b)
	b.Run("raw", func(b *testing.B) {
		pubConn, consConn, q := rawPair(b, url)
		pub, _ := pubConn.Channel()
		_ = pub.Confirm(false)
		cons, _ := consConn.Channel()
		_ = cons.Qos(64, 0, false)
		deliveries, err := cons.Consume(q, "", false, true, false, false, nil)
		if err != nil {
			b.Fatal(err)
		}
		lat := make([]time.Duration, 0, b.N)
		body := []byte("done: built the thing, 3 files changed, tests pass")
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			dc, err := pub.PublishWithDeferredConfirmWithContext(context.Background(), "", q, true, false,
				amqp.Publishing{DeliveryMode: amqp.Persistent, MessageId: uuid.NewString(), Body: body})
			if err != nil {
				b.Fatal(err)
			}
			d := <-deliveries
			_ = d.Ack(false)
			if !dc.Wait() {
				b.Fatal("nacked")
			}
			lat = append(lat, time.Since(t0))
		}
		reportLatency(b, lat)
	})
	for _, v := range gatewayVariants {
		b.Run(v.name, func(b *testing.B) {
			ga, gb, w, p := twoHosts(b, v.tune)
			ctx := context.Background()
			target := "lead@" + gb.Host()
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				if _, err := ga.Core().Send(ctx, w, bridge.SendRequest{Target: target, Message: "done: built the thing, 3 files changed, tests pass"}, nil); err != nil {
					b.Fatal(err)
				}
				r, err := gb.Core().Poll(ctx, p, bridge.PollRequest{Wait: 10 * time.Second}, nil)
				if err != nil || len(r.Messages) != 1 {
					b.Fatalf("poll: %+v %v", r, err)
				}
				lat = append(lat, time.Since(t0))
			}
			reportLatency(b, lat)
		})
	}
}

// BenchmarkBrokerThroughput: confirmed publishes per second, raw (window of
// 512 deferred confirms) against gateway sends (128 concurrent senders,
// each a confirmed, mandatory publish sharing the transport's confirm
// window). Target (P3): gateway ≥ 85% of raw-same-route-signed, the raw
// publisher doing the same broker work and the same Ed25519 work.
func BenchmarkBrokerThroughput(b *testing.B) {
	url := brokerURL(b)
	const n = 5000
	b.Run("raw", func(b *testing.B) {
		pubConn, _, q := rawPair(b, url)
		pub, _ := pubConn.Channel()
		_ = pub.Confirm(false)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			rawPublish(b, pub, q, n)
			b.StopTimer()
			_, _ = pub.QueuePurge(q, false)
			b.StartTimer()
		}
	})
	// raw with a consumer acking on its own connection: the same broker work
	// as the gateway run, where host B consumes and acks what A publishes
	b.Run("raw-consumed", func(b *testing.B) {
		pubConn, consConn, q := rawPair(b, url)
		pub, _ := pubConn.Channel()
		_ = pub.Confirm(false)
		cons, _ := consConn.Channel()
		_ = cons.Qos(1024, 0, false)
		deliveries, err := cons.Consume(q, "", false, true, false, false, nil)
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			for d := range deliveries {
				_ = d.Ack(false)
			}
		}()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			rawPublish(b, pub, q, n)
		}
	})
	// raw doing the gateway's broker work: the envelope's headers, through
	// bridge.msg (topic) into host B's real inbox (DLX, caps, TTL), where
	// host B's gateway consumes and holds it until drained
	b.Run("raw-same-route", func(b *testing.B) {
		_, gb, w, p := twoHosts(b, func(c *gateway.Config) { gateway.SetUnsigned(c, true) }) // raw signs nothing
		rawSameRoute(b, url, n, gb, w, p, "raw", nil)
	})
	// raw-same-route with the gateway's crypto: the raw publisher signs
	// every envelope with host A's key (as A's gateway would) and host B's
	// gateway verifies it on arrival — the baseline of P3 (signed gateway
	// throughput ≥ 85% of it)
	b.Run("raw-same-route-signed", func(b *testing.B) {
		ga, gb, w, p := twoHosts(b)
		key, _, err := keys.LoadOrCreate(ga.StateDir(), ga.Host())
		if err != nil {
			b.Fatal(err)
		}
		rawSameRoute(b, url, n, gb, w, p, ga.Host(), func(env *bridge.Envelope) { env.Sig = key.Sign(env.SigningInput()) })
	})
	for _, v := range gatewayVariants {
		b.Run(v.name, func(b *testing.B) {
			ga, gb, w, p := twoHosts(b, v.tune)
			ctx := context.Background()
			target := "lead@" + gb.Host()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				var wg sync.WaitGroup
				next := make(chan int, n)
				for k := 0; k < n; k++ {
					next <- k
				}
				close(next)
				for s := 0; s < 128; s++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range next {
							if _, err := ga.Core().Send(ctx, w, bridge.SendRequest{Target: target, Message: "done: built the thing, 3 files changed, tests pass"}, nil); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				b.ReportMetric(float64(n)/time.Since(start).Seconds(), "msgs/s")
				b.StopTimer()
				drainHeld(b, gb, p, n)
				b.StartTimer()
			}
		})
	}
}

// drainHeld polls n messages off p's inbox so the inbox cap never bites.
// rawSameRoute publishes n envelopes a round from w to p through
// bridge.msg with raw amqp091-go, as host, signed by sign when it is not
// nil, and waits until gb holds them all.
func rawSameRoute(b *testing.B, url string, n int, gb *gateway.Gateway, w, p, host string, sign func(*bridge.Envelope)) {
	conn, err := amqp.Dial(url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	pub, _ := conn.Channel()
	_ = pub.Confirm(false)
	body := []byte("done: built the thing, 3 files changed, tests pass")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rawWindow(b, n, func() (*amqp.DeferredConfirmation, error) {
			now := time.Now()
			env := &bridge.Envelope{V: 1, Kind: bridge.KindReply, MsgID: uuid.NewString(), From: w, To: p, Host: host, TS: now, ExpiresAt: now.Add(time.Hour), Body: body}
			if sign != nil {
				sign(env)
			}
			return pub.PublishWithDeferredConfirmWithContext(context.Background(), broker.ExchangeMsg, p, true, false,
				amqp.Publishing{Headers: amqp.Table(env.Headers()), DeliveryMode: amqp.Persistent, MessageId: env.MsgID, Body: body})
		})
		b.StopTimer()
		drainHeld(b, gb, p, n)
		b.StartTimer()
	}
}

func drainHeld(b *testing.B, g *gateway.Gateway, p string, n int) {
	for got := 0; got < n; {
		r, err := g.Core().Poll(context.Background(), p, bridge.PollRequest{Max: 500, Wait: 5 * time.Second}, nil)
		if err != nil || len(r.Messages) == 0 {
			b.Fatalf("drain: %d of %d (%v)", got, n, err)
		}
		got += len(r.Messages)
	}
}

func rawPair(b *testing.B, url string) (*amqp.Connection, *amqp.Connection, string) {
	b.Helper()
	pubConn, err := amqp.Dial(url)
	if err != nil {
		b.Fatal(err)
	}
	consConn, err := amqp.Dial(url)
	if err != nil {
		b.Fatal(err)
	}
	q := "bench.raw." + uuid.NewString()
	ch, _ := consConn.Channel()
	if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_, _ = ch.QueueDelete(q, false, false, false)
		pubConn.Close()
		consConn.Close()
	})
	return pubConn, consConn, q
}

// twoHosts starts hosts A (worker w) and B (primary lead) on the broker.
func twoHosts(b *testing.B, tune ...func(*gateway.Config)) (ga, gb *gateway.Gateway, w, p string) {
	b.Helper()
	ga = gatewaytest.StartHost(b, gatewaytest.UniqueHost("ba"), brokerURL(b), tune...)
	gb = gatewaytest.StartHost(b, gatewaytest.UniqueHost("bb"), brokerURL(b), tune...)
	ctx := context.Background()
	we := gatewaytest.RegisterOn(b, ga, "w", bridge.RoleWorker)
	pe := gatewaytest.RegisterOn(b, gb, "lead", bridge.RolePrimary)
	gatewaytest.Eventually(b, 10*time.Second, "A sees lead", func() bool { _, err := ga.Core().Resolve("lead@" + gb.Host()); return err == nil })
	for i := 0; i < 20; i++ { // warm up
		_, _ = ga.Core().Send(ctx, we.GID, bridge.SendRequest{Target: "lead@" + gb.Host(), Message: "warm"}, nil)
		_, _ = gb.Core().Poll(ctx, pe.GID, bridge.PollRequest{Wait: 5 * time.Second}, nil)
	}
	return ga, gb, we.GID, pe.GID
}

func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	b.ReportMetric(us(lat[len(lat)/2]), "p50-µs")
	b.ReportMetric(us(lat[len(lat)*99/100]), "p99-µs")
}

// rawPublish publishes n persistent, mandatory messages to q on the
// default exchange with a window of 512 deferred confirms.
func rawPublish(b *testing.B, pub *amqp.Channel, q string, n int) {
	body := []byte("done: built the thing, 3 files changed, tests pass")
	rawWindow(b, n, func() (*amqp.DeferredConfirmation, error) {
		return pub.PublishWithDeferredConfirmWithContext(context.Background(), "", q, true, false,
			amqp.Publishing{DeliveryMode: amqp.Persistent, MessageId: uuid.NewString(), Body: body})
	})
}

// rawWindow runs n publishes with up to 512 confirms outstanding and
// reports msgs/s.
func rawWindow(b *testing.B, n int, publish func() (*amqp.DeferredConfirmation, error)) {
	start := time.Now()
	window := make([]*amqp.DeferredConfirmation, 0, 512)
	for k := 0; k < n; k++ {
		dc, err := publish()
		if err != nil {
			b.Fatal(err)
		}
		if window = append(window, dc); len(window) == cap(window) {
			window[0].Wait()
			window = window[1:]
		}
	}
	for _, dc := range window {
		dc.Wait()
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "msgs/s")
}
