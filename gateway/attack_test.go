package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/attacktest"
	"github.com/herdbridge/herdbridge/bridge/broker"
	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/keys"
)

// TestAttackerOnBroker runs the attack suite on whole gateways on a real
// RabbitMQ, 100 messages per attack: the attacker publishes straight to
// the broker with a raw AMQP client and binds spy queues of its own to
// capture real signed messages. Then `herdbridge stats` shows the
// counters, and A's audit log has a line per refusal with metadata only.
func TestAttackerOnBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("1800 attack messages")
	}
	// 100 MiB of oversized bodies go through the broker: heartbeats may lag
	// far behind the tests' usual 900 ms presence TTL (production: 15 s)
	logTo := func(h slog.Handler) func(c *gateway.Config) {
		return func(c *gateway.Config) {
			c.Core.PresenceTTL = 10 * time.Second
			c.Logger = slog.New(slog.NewMultiHandler(c.Logger.Handler(), h))
		}
	}
	var ga *gateway.Gateway
	rep := attacktest.Run(t, attacktest.Harness{N: 100, Timeout: 30 * time.Second, Pace: 5 * time.Millisecond,
		Start: func(t *testing.T, logA, logB slog.Handler) attacktest.Deployment {
			var d attacktest.Deployment
			ga, d = brokerDeployment(t, "evil", logTo(logA), logTo(logB))
			return d
		}})
	checkAttackStats(t, ga, rep.N)
}

// TestNoPresenceRace runs the suite's presence race on whole gateways on
// the broker, with 50 workers on host B.
func TestNoPresenceRace(t *testing.T) {
	none := func(*gateway.Config) {}
	attacktest.RunPresenceRace(t, attacktest.Harness{Timeout: 20 * time.Second, Start: func(t *testing.T, _, _ slog.Handler) attacktest.Deployment {
		_, d := brokerDeployment(t, "late", none, none)
		return d
	}}, 50)
}

// brokerDeployment starts gateways A and B on the broker (tuned by tuneA
// and tuneB), and evil's key (trusted by both, no gateway) and a
// stranger's (trusted by nobody).
func brokerDeployment(t *testing.T, evilPrefix string, tuneA, tuneB func(*gateway.Config)) (*gateway.Gateway, attacktest.Deployment) {
	url := brokerURL(t)
	evilHost, evilDir := gatewaytest.UniqueHost(evilPrefix), gatewaytest.TempDir(t)
	gatewaytest.JoinTrustMesh(t, evilDir, evilHost) // trusted by the gateways below
	evil, err := keys.Load(evilDir + "/" + keys.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	stranger, _, err := keys.LoadOrCreate(gatewaytest.TempDir(t), "stranger")
	if err != nil {
		t.Fatal(err)
	}
	ga := gatewaytest.StartHost(t, gatewaytest.UniqueHost("ta"), url, tuneA)
	gb := gatewaytest.StartHost(t, gatewaytest.UniqueHost("tb"), url, tuneB)
	ch := rawChannel(t, url)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	return ga, attacktest.Deployment{A: ga.Core(), B: gb.Core(), Evil: evilHost, EvilKey: evil, Stranger: stranger,
		Publish: func(t testing.TB, ex, key string, h map[string]any, body []byte) {
			t.Helper()
			dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), ex, key, false, false,
				amqp.Publishing{Headers: amqp.Table(h), Body: body, DeliveryMode: amqp.Persistent})
			if err != nil {
				t.Fatal(err)
			}
			if !dc.Wait() {
				t.Fatal("broker nacked an attack publish")
			}
		},
		Tap: func(t testing.TB, ex, key string) func() (map[string]any, []byte, bool) {
			t.Helper()
			q, err := ch.QueueDeclare("", false, true, true, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := ch.QueueBind(q.Name, key, ex, false, nil); err != nil {
				t.Fatal(err)
			}
			return func() (map[string]any, []byte, bool) {
				d, ok, err := ch.Get(q.Name, true)
				if err != nil {
					t.Fatal(err)
				}
				return d.Headers, d.Body, ok
			}
		},
	}
}

// checkAttackStats: the admin socket's stats op (which `herdbridge stats
// --json` prints: cmd/herdbridge's TestStatsCommand) shows the counters;
// the audit log has a line per refusal, with metadata only: no body of
// any message.
func checkAttackStats(t *testing.T, ga *gateway.Gateway, n int) {
	r, err := gateway.Ask(ga.StateDir(), gateway.Request{Op: "stats"})
	if err != nil || r.Stats == nil {
		t.Fatalf("stats: %v %+v", err, r)
	}
	st := *r.Stats
	if !st.Signing || st.Refused[bridge.RefuseBadSignature] < uint64(3*n) || st.Refused[bridge.RefuseReplayed] != uint64(2*n) {
		t.Errorf("stats: %+v", st)
	}
	ga.Close() // flushes the audit log
	audit, err := os.ReadFile(st.Audit)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(audit)), "\n")
	verdicts := map[string]int{}
	for _, l := range lines {
		var r bridge.AuditRecord
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("audit line %q: %v", l, err)
		}
		verdicts[r.Verdict]++
	}
	for _, secret := range []string{"attack: ", "legit-", "capture-"} {
		if bytes.Contains(audit, []byte(secret)) {
			t.Errorf("the audit log holds a message body (%q)", secret)
		}
	}
	t.Logf("audit log of host A: %d lines, verdicts %v", len(lines), verdicts)
	if verdicts["refused: "+bridge.RefuseToMismatch] != n || verdicts["accepted"] < n {
		t.Errorf("audit verdicts %v", verdicts)
	}
}

// TestPresenceWaitIsBounded: messages from senders with no presence yet
// wait for it, but at most half the prefetch window per inbox (here 32 of 64):
// a flood of them — even signed by a trusted host — is refused past that,
// and cannot wedge the inbox; what waited is refused at PresenceWait.
func TestPresenceWaitIsBounded(t *testing.T) {
	brokerURL(t)
	const n = 100
	evilHost, evilDir := gatewaytest.UniqueHost("flood"), gatewaytest.TempDir(t)
	gatewaytest.JoinTrustMesh(t, evilDir, evilHost)
	evil, err := keys.Load(evilDir + "/" + keys.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	ga := gatewaytest.StartHost(t, gatewaytest.UniqueHost("pa"), brokerURL(t), func(c *gateway.Config) { c.Core.Prefetch = 64; c.Core.PresenceWait = 3 * time.Second })
	gb := gatewaytest.StartHost(t, gatewaytest.UniqueHost("pb"), brokerURL(t))
	ctx := context.Background()
	lead := gatewaytest.RegisterOn(t, ga, "lead", bridge.RolePrimary)
	w := gatewaytest.RegisterOn(t, gb, "w", bridge.RoleWorker)
	target := "lead@" + ga.Host()
	gatewaytest.Eventually(t, 10*time.Second, "each sees the other", func() bool {
		_, e1 := gb.Core().Resolve(target)
		_, e2 := ga.Core().Resolve("w@" + gb.Host())
		return e1 == nil && e2 == nil
	})
	ch := rawChannel(t, brokerURL(t))
	for i := 0; i < n; i++ {
		now := time.Now()
		e := &bridge.Envelope{V: bridge.Version, Kind: bridge.KindReply, MsgID: uuid.NewString(), From: uuid.NewString(), To: lead.GID,
			Host: evilHost, TS: now, ExpiresAt: now.Add(time.Hour), Body: []byte("from nobody known")}
		e.Sig = evil.Sign(e.SigningInput())
		if err := ch.PublishWithContext(ctx, broker.ExchangeMsg, lead.GID, false, false, amqp.Publishing{Headers: amqp.Table(e.Headers()), Body: e.Body}); err != nil {
			t.Fatal(err)
		}
	}
	gatewaytest.Eventually(t, 10*time.Second, "all but 32 refused at once", func() bool {
		return ga.Core().Refused()[bridge.RefuseFromNotOnHost] == n-32
	})
	start := time.Now()
	if _, err := gb.Core().Send(ctx, w.GID, bridge.SendRequest{Target: target, Message: "legit, behind the flood"}, nil); err != nil {
		t.Fatal(err)
	}
	r, err := ga.Core().Poll(ctx, lead.GID, bridge.PollRequest{Wait: 2 * time.Second}, nil)
	if err != nil || len(r.Messages) != 1 || r.Messages[0].Body != "legit, behind the flood" {
		t.Fatalf("legit reply while 32 wait for presence: %+v %v", r.Messages, err)
	}
	took := time.Since(start)
	gatewaytest.Eventually(t, 10*time.Second, "the 32 refused at PresenceWait", func() bool {
		return ga.Core().Refused()[bridge.RefuseFromNotOnHost] == n
	})
	t.Logf("%d messages from unknown senders: %d refused at once, 32 waited %v and were refused; a legit reply meanwhile took %v",
		n, n-32, ga.Core().Config().PresenceWait, took.Round(time.Millisecond))
}

// TestBacklogOutlivesSender: replies wait in a primary's inbox while its
// gateway is down; meanwhile their sender is removed on its host. The
// restarted gateway still knows (from its stored bindings) that the sender
// lived there, and delivers them.
func TestBacklogOutlivesSender(t *testing.T) {
	url := brokerURL(t)
	const n = 10
	hostA, dirA := gatewaytest.UniqueHost("oa"), gatewaytest.TempDir(t)
	at := func(c *gateway.Config) { c.StateDir = dirA; c.Core.PresenceWait = time.Second }
	ga := gatewaytest.StartHost(t, hostA, url, at)
	gb := gatewaytest.StartHost(t, gatewaytest.UniqueHost("ob"), brokerURL(t), func(c *gateway.Config) { c.Core.PresenceTTL = 30 * time.Second })
	ctx := context.Background()
	lead := gatewaytest.RegisterOn(t, ga, "lead", bridge.RolePrimary)
	w := gatewaytest.RegisterOn(t, gb, "w", bridge.RoleWorker)
	target := "lead@" + hostA
	gatewaytest.Eventually(t, 10*time.Second, "each sees the other", func() bool {
		_, e1 := gb.Core().Resolve(target)
		_, e2 := ga.Core().Resolve("w@" + gb.Host())
		return e1 == nil && e2 == nil
	})
	ga.Close()
	for i := 0; i < n; i++ {
		if _, err := gb.Core().Send(ctx, w.GID, bridge.SendRequest{Target: target, Message: fmt.Sprintf("last words %d", i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := gb.Core().Remove(ctx, w.GID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // w's presence is long gone
	ga = gatewaytest.StartHost(t, hostA, url, at)
	got := 0
	for deadline := time.Now().Add(10 * time.Second); got < n && time.Now().Before(deadline); {
		r, err := ga.Core().Poll(ctx, lead.GID, bridge.PollRequest{Max: 100, Wait: time.Second}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got += len(r.Messages)
	}
	t.Logf("%d replies queued while the primary's gateway was down, sender removed meanwhile: %d delivered after restart, refusals %v", n, got, ga.Core().Refused())
	if got != n {
		t.Fatalf("%d of %d delivered", got, n)
	}
}

// rawChannel is a raw amqp091 channel on url, closed with the test.
func rawChannel(t testing.TB, url string) *amqp.Channel {
	t.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}
