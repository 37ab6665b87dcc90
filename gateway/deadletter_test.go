package gateway_test

import (
	"context"
	"fmt"
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

// expiringReplies publishes n REPLYs from gid on host (signed with the key
// in dir, exactly as that host's gateway signs one) to to's inbox, each
// good for 200 ms only — a gateway's own are good for a day — and returns
// their msgIds.
func expiringReplies(t *testing.T, ch *amqp.Channel, dir, host, gid, to string, n int) map[string]bool {
	t.Helper()
	k, _, err := keys.LoadOrCreate(dir, host)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for i := range n {
		now := time.Now()
		e := &bridge.Envelope{V: bridge.Version, Kind: bridge.KindReply, MsgID: uuid.NewString(), TraceID: uuid.NewString(), From: gid, To: to,
			Host: host, TS: now, ExpiresAt: now.Add(200 * time.Millisecond), Body: []byte(fmt.Sprint("reply ", i, " from ", host))}
		e.Sig = k.Sign(e.SigningInput())
		err := ch.PublishWithContext(context.Background(), broker.ExchangeMsg, to, true, false, amqp.Publishing{
			Headers: amqp.Table(e.Headers()), DeliveryMode: amqp.Persistent, MessageId: e.MsgID, Body: e.Body})
		if err != nil {
			t.Fatal(err)
		}
		ids[e.MsgID] = true
	}
	return ids
}

// seesHost reports whether g's roster lists host's gateway.
func seesHost(g *gateway.Gateway, host string) bool {
	for _, h := range g.Core().Roster().Hosts {
		if h.Host == host {
			return true
		}
	}
	return false
}

// failedAbout polls gid on g until it holds a FAILED about each of want,
// then once more, and returns how many came per msgId.
func failedAbout(t *testing.T, g *gateway.Gateway, gid string, want map[string]bool) map[string]int {
	t.Helper()
	got := map[string]int{}
	poll := func(wait time.Duration) {
		r, err := g.Core().Poll(context.Background(), gid, bridge.PollRequest{Wait: wait, Max: 500}, nil)
		if err != nil {
			t.Fatalf("poll on %s: %v", g.Host(), err)
		}
		for _, m := range r.Messages {
			if m.Kind == bridge.KindFailed {
				got[m.Corr]++
			}
		}
	}
	told := func() int {
		k := 0
		for id := range want {
			if got[id] > 0 {
				k++
			}
		}
		return k
	}
	for deadline := time.Now().Add(20 * time.Second); told() < len(want) && time.Now().Before(deadline); {
		poll(500 * time.Millisecond)
	}
	if k := told(); k < len(want) {
		t.Fatalf("%s: %d of %d dead letters reported to their sender", g.Host(), k, len(want))
	}
	poll(500 * time.Millisecond) // a second report would be right behind
	return got
}

// reportedRecords are the dead-letter records, across gs, that say they
// told the sender of one of want.
func reportedRecords(t *testing.T, want map[string]bool, gs ...*gateway.Gateway) map[string][]bridge.DeadLetterRecord {
	t.Helper()
	out := map[string][]bridge.DeadLetterRecord{}
	for _, g := range gs {
		dl, err := g.Core().DeadLetters(100000)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range dl {
			if want[r.MsgID] && r.Reported {
				out[r.MsgID] = append(out[r.MsgID], r)
			}
		}
	}
	return out
}

// TestDeadLettersFromAnyHost: three gateways on the broker; replies from
// workers on A and C expire in the inbox of a primary whose gateway (B) is
// down. bridge.dlq is consumed by A and C in turn: whichever consumed
// each, its sender is told FAILED exactly once and its own host's
// dead-letter log has it. Then A is down too, so C consumes all of A's:
// they wait as notices in A's control queue and are reported when A is
// back.
func TestDeadLettersFromAnyHost(t *testing.T) {
	url := brokerURL(t)
	const n = 10
	hostA, hostB, hostC := gatewaytest.UniqueHost("da"), gatewaytest.UniqueHost("db"), gatewaytest.UniqueHost("dc")
	dirA, dirC := gatewaytest.TempDir(t), gatewaytest.TempDir(t)
	inA := func(c *gateway.Config) { c.StateDir = dirA }
	ga := gatewaytest.StartHost(t, hostA, url, inA)
	gb := gatewaytest.StartHost(t, hostB, url, func(c *gateway.Config) { c.Core.InboxTTL = 300 * time.Millisecond })
	gc := gatewaytest.StartHost(t, hostC, url, func(c *gateway.Config) { c.StateDir = dirC })
	lead := gatewaytest.RegisterOn(t, gb, "lead", bridge.RolePrimary)
	wa := gatewaytest.RegisterOn(t, ga, "wa", bridge.RoleWorker)
	wc := gatewaytest.RegisterOn(t, gc, "wc", bridge.RoleWorker)
	gatewaytest.Eventually(t, 10*time.Second, "A and C see each other's gateway", func() bool {
		return seesHost(ga, hostC) && seesHost(gc, hostA)
	})
	gb.Close()
	ch := rawChannel(t, url)

	fromA := expiringReplies(t, ch, dirA, hostA, wa.GID, lead.GID, n)
	fromC := expiringReplies(t, ch, dirC, hostC, wc.GID, lead.GID, n)
	forwarded := 0
	for _, s := range []struct {
		g    *gateway.Gateway
		gid  string
		sent map[string]bool
	}{{ga, wa.GID, fromA}, {gc, wc.GID, fromC}} {
		for id, k := range failedAbout(t, s.g, s.gid, s.sent) {
			if k != 1 {
				t.Errorf("%s: %d FAILEDs about %s, want exactly 1", s.g.Host(), k, id)
			}
		}
		recs := reportedRecords(t, s.sent, ga, gc)
		for id := range s.sent {
			if len(recs[id]) != 1 {
				t.Errorf("%s: %d dead-letter records say its sender was told, want 1: %+v", id, len(recs[id]), recs[id])
			}
		}
		if own := reportedRecords(t, s.sent, s.g); len(own) != n {
			t.Errorf("%s's dead-letter log has %d of its %d dead letters", s.g.Host(), len(own), n)
		}
		for _, r := range recs {
			if len(r) > 0 && r[0].ConsumedBy != "" {
				forwarded++
			}
		}
	}
	t.Logf("%d dead letters of A's and C's workers: every sender told once; %d of them consumed by the other gateway and forwarded", 2*n, forwarded)

	// A is down as well: only C consumes, A hears of them when back
	ga.Close()
	down := expiringReplies(t, ch, dirA, hostA, wa.GID, lead.GID, n)
	gatewaytest.Eventually(t, 20*time.Second, "C forwarded every dead letter of A's", func() bool {
		dl, err := gc.Core().DeadLetters(100000)
		if err != nil {
			t.Fatal(err)
		}
		k := 0
		for _, r := range dl {
			if down[r.MsgID] && r.ForwardedTo == hostA {
				k++
			}
		}
		return k == n
	})
	ga = gatewaytest.StartHost(t, hostA, url, inA)
	for id, k := range failedAbout(t, ga, wa.GID, down) {
		if k != 1 {
			t.Errorf("after A's restart: %d FAILEDs about %s, want exactly 1", k, id)
		}
	}
	recs := reportedRecords(t, down, ga)
	for id := range down {
		if len(recs[id]) != 1 || recs[id][0].ConsumedBy != hostC {
			t.Errorf("A's dead-letter log for %s: %+v, want one reported record consumed by %s", id, recs[id], hostC)
		}
	}
}
