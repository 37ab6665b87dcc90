package memnettest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/memnet"
	"github.com/herdbridge/herdbridge/bridge/memnet/memnettest"
)

// TestNoPresenceRace: a message sent right after its sender registered is
// not refused for a missing presence — 20 workers on B register and reply
// at once — and a message whose sender's signed heartbeat comes after it
// waits for it, while one whose heartbeat never comes is refused once
// PresenceWait is over.
func TestNoPresenceRace(t *testing.T) {
	c := memnettest.New(t)
	// long enough for a heartbeat on a loaded machine (one came after
	// 644 ms at load 14), short enough to see the "never" case refused
	a := c.Start("a", func(cfg *bridge.Config) { cfg.PresenceWait = 2 * time.Second })
	b := c.Start("b")
	late := newKey(t, "late")
	c.Trust("late", late.Public())
	lead := a.Register(t, "lead", bridge.RolePrimary)
	c.Converge(t)
	const workers = 20
	for i := range workers {
		w := b.Register(t, fmt.Sprintf("w%02d", i), bridge.RoleWorker)
		if _, err := b.Core.Send(ctx, w.GID, bridge.SendRequest{Target: "lead@a", Message: fmt.Sprintf("first words %02d", i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]bool{} // (in any order: one may wait for its sender's heartbeat)
	memnettest.Eventually(t, "every worker's first words arrived", func() bool {
		r, err := a.Core.Poll(ctx, lead.GID, bridge.PollRequest{Max: 500, Wait: 100 * time.Millisecond}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range r.Messages {
			got[m.Body] = true
		}
		return len(got) == workers
	})
	if n := a.Core.Refused()[bridge.RefuseFromNotOnHost]; n != 0 {
		t.Fatalf("%d refused for a presence race", n)
	}

	publish := func(ex memnet.Exchange, key string, e *bridge.Envelope) {
		e.Sig = late.Sign(e.SigningInput())
		if _, err := c.Net.Inject(ex, key, e.Headers(), e.Body); err != nil {
			t.Fatal(err)
		}
	}
	msg := func(from, body string) *bridge.Envelope {
		now := time.Now()
		return &bridge.Envelope{V: bridge.Version, Kind: bridge.KindReply, MsgID: uuid.NewString(), From: from, To: lead.GID, Host: "late", TS: now, ExpiresAt: now.Add(time.Hour), Body: []byte(body)}
	}
	slow, never := uuid.NewString(), uuid.NewString()
	publish(memnet.ExchangeMsg, lead.GID, msg(slow, "before my heartbeat"))
	publish(memnet.ExchangeMsg, lead.GID, msg(never, "no heartbeat ever"))
	now := time.Now()
	publish(memnet.ExchangeRoster, "roster.late", &bridge.Envelope{V: bridge.Version, Kind: bridge.KindPresence, MsgID: uuid.NewString(), From: slow,
		To: "roster.late.slow", Host: "late", TS: now, ExpiresAt: now.Add(time.Minute),
		Body: fmt.Appendf(nil, `{"gid":%q,"name":"slow","host":"late","role":"worker"}`, slow)})
	if got := drainUntil(t, a, lead.GID, "before my heartbeat"); len(got) != 1 {
		t.Fatalf("after the heartbeat: %q", bodies(got))
	}
	memnettest.Eventually(t, "the message with no heartbeat refused at PresenceWait", func() bool {
		return a.Core.Refused()[bridge.RefuseFromNotOnHost] == 1
	})
	if r, _ := a.Core.Poll(ctx, lead.GID, bridge.PollRequest{Max: 10}, nil); len(r.Messages) != 0 {
		t.Fatalf("delivered without its sender's presence: %+v", r.Messages)
	}
}
