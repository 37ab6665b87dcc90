package attacktest

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
)

// RunPresenceRace runs the presence race against h's deployment: a
// message sent right after its sender registered is not refused for a
// missing presence — workers on B register and reply to A's primary at
// once —, and a message whose sender's signed heartbeat comes after it
// waits for it and is delivered, while one whose heartbeat never comes is
// refused once A's PresenceWait is over.
func RunPresenceRace(t *testing.T, h Harness, workers int) {
	t.Helper()
	if h.Start == nil {
		t.Fatal("attacktest: Harness.Start is required")
	}
	h = h.withDefaults()
	d := h.Start(t, slog.DiscardHandler, slog.DiscardHandler)
	hostA, hostB := d.A.Config().Host, d.B.Config().Host
	ctx := context.Background()
	lead, _, err := d.A.Register(ctx, bridge.RegisterRequest{Name: "lead", Role: bridge.RolePrimary})
	if err != nil {
		t.Fatal(err)
	}
	target := "lead@" + hostA
	eventually(t, h.Timeout, "B sees lead, A trusts and sees host B", func() bool {
		_, err := d.B.Resolve(target)
		return err == nil && seesHost(d.A, hostB)
	})
	for i := range workers {
		w, _, err := d.B.Register(ctx, bridge.RegisterRequest{Name: fmt.Sprintf("w%02d", i), Role: bridge.RoleWorker})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.B.Send(ctx, w.GID, bridge.SendRequest{Target: target, Message: fmt.Sprintf("first words %02d", i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	got := drainBodies(t, h, d.A, lead.GID, workers) // in any order: one may wait for its sender's heartbeat
	t.Logf("%d workers registered and replied at once: %d replies arrived, refusals %v", workers, len(got), d.A.Refused())
	if n := d.A.Refused()[bridge.RefuseFromNotOnHost]; len(got) != workers || n != 0 {
		t.Fatalf("%d of %d arrived, %d refused for a presence race", len(got), workers, n)
	}
	lateHeartbeat(t, h, d, lead.GID)
}

// lateHeartbeat: two replies signed by evil from senders with no presence;
// the heartbeat of one comes after its message.
func lateHeartbeat(t *testing.T, h Harness, d Deployment, lead string) {
	t.Helper()
	ctx := context.Background()
	publish := func(ex, key string, e *bridge.Envelope) {
		e.Sig = d.EvilKey.Sign(e.SigningInput())
		d.Publish(t, ex, key, e.Headers(), e.Body)
	}
	msg := func(from, body string) *bridge.Envelope {
		now := time.Now()
		return &bridge.Envelope{V: bridge.Version, Kind: bridge.KindReply, MsgID: uuid.NewString(), From: from, To: lead,
			Host: d.Evil, TS: now, ExpiresAt: now.Add(time.Hour), Body: []byte(body)}
	}
	slow, never := uuid.NewString(), uuid.NewString()
	publish(ExchangeMsg, lead, msg(slow, "before my heartbeat"))
	publish(ExchangeMsg, lead, msg(never, "no heartbeat ever"))
	time.Sleep(d.A.Config().PresenceTTL / 3)
	if r, _ := d.A.Poll(ctx, lead, bridge.PollRequest{}, nil); len(r.Messages) != 0 {
		t.Fatalf("delivered before its sender's presence: %+v", r.Messages)
	}
	now := time.Now()
	publish(ExchangeRoster, "roster."+d.Evil, &bridge.Envelope{V: bridge.Version, Kind: bridge.KindPresence, MsgID: uuid.NewString(), From: slow,
		To: "roster." + d.Evil + ".slow", Host: d.Evil, TS: now, ExpiresAt: now.Add(time.Minute),
		Body: fmt.Appendf(nil, `{"gid":%q,"name":"slow","host":%q,"role":"worker"}`, slow, d.Evil)})
	if got := drainBodies(t, h, d.A, lead, 1); !got["before my heartbeat"] || len(got) != 1 {
		t.Fatalf("after the heartbeat: %v", got)
	}
	eventually(t, h.Timeout, "the message with no heartbeat refused at PresenceWait", func() bool {
		return d.A.Refused()[bridge.RefuseFromNotOnHost] == 1
	})
	if r, _ := d.A.Poll(ctx, lead, bridge.PollRequest{Max: 10}, nil); len(r.Messages) != 0 {
		t.Fatalf("delivered without its sender's presence: %+v", r.Messages)
	}
	t.Logf("late heartbeat: its message waited and was delivered; no heartbeat: refused after %v (%v)", d.A.Config().PresenceWait, d.A.Refused())
}

// drainBodies polls gid on c until n distinct bodies arrived.
func drainBodies(t *testing.T, h Harness, c *bridge.Core, gid string, n int) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	eventually(t, h.Timeout, fmt.Sprintf("%d messages drained", n), func() bool {
		r, err := c.Poll(context.Background(), gid, bridge.PollRequest{Max: 500, Wait: 100 * time.Millisecond}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range r.Messages {
			got[m.Body] = true
		}
		return len(got) >= n
	})
	return got
}

// seesHost reports whether c's roster lists host from verified heartbeats.
func seesHost(c *bridge.Core, host string) bool {
	for _, v := range c.Roster().Hosts {
		if v.Host == host && v.Trust != bridge.TrustUntrusted {
			return true
		}
	}
	return false
}
