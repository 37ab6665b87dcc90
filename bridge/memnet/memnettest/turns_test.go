package memnettest_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/memnet"
	"github.com/herdbridge/herdbridge/bridge/memnet/memnettest"
)

// crossAsk has w on b ask lead on a while lead long-polls, and returns the
// turn lead received. The ask call's wait runs out at once: the turn stays
// open, to be resumed by turn_id.
func crossAsk(t *testing.T, a, b *memnettest.Host, lead, w bridge.Entity) string {
	t.Helper()
	polled := make(chan *bridge.Result, 1)
	go func() {
		r, err := a.Core.Poll(ctx, lead.GID, bridge.PollRequest{Wait: memnettest.MaxWait}, nil)
		if err != nil {
			t.Errorf("poll: %v", err)
		}
		polled <- r
	}()
	memnettest.Eventually(t, "lead long-polls", func() bool { _, waiting := a.Core.Held(lead.GID); return waiting })
	res, err := b.Core.Ask(ctx, w.GID, bridge.AskRequest{Question: "which db?", Target: "lead@a", Wait: time.Millisecond}, nil)
	if err != nil || res.Status != bridge.StatusPending {
		t.Fatalf("ask: %+v, %v; want pending", res, err)
	}
	got := <-polled
	if got == nil || got.TurnID != res.TurnID || !slices.Equal(bodies(got.Messages), []string{"which db?"}) {
		t.Fatalf("lead polled %+v, want the ASK of turn %s", got, res.TurnID)
	}
	return res.TurnID
}

// answered resumes w's ask of turn on h and checks it took body.
func answered(t *testing.T, h *memnettest.Host, w bridge.Entity, turn, body string) {
	t.Helper()
	res, err := h.Core.Ask(ctx, w.GID, bridge.AskRequest{TurnID: turn, Wait: memnettest.MaxWait}, nil)
	if err != nil || res.Status != bridge.StatusAnswered || !slices.Equal(bodies(res.Messages), []string{body}) {
		t.Fatalf("resumed ask on %s: %+v, %v; want answered %q", h.ID, res, err, body)
	}
}

// TestAskSurvivesRestartAcrossHosts: a worker on b asks a primary on a;
// either side's gateway restarts mid-turn, and the turn still ends
// answered on both sides.
func TestAskSurvivesRestartAcrossHosts(t *testing.T) {
	for _, restart := range []string{"a", "b"} {
		t.Run("the gateway of "+restart+" restarts", func(t *testing.T) {
			c := memnettest.New(t, "a", "b")
			a, b := c.Hosts()[0], c.Hosts()[1]
			lead, w := a.Register(t, "lead", bridge.RolePrimary), b.Register(t, "w", bridge.RoleWorker)
			c.Converge(t)
			turn := crossAsk(t, a, b, lead, w)
			if restart == "a" {
				a = c.Restart(a)
				a.Register(t, "lead", bridge.RolePrimary) // its relay re-attaches: same entity
			} else {
				b = c.Restart(b)
			}
			c.Converge(t)
			res, err := a.Core.Send(ctx, lead.GID, bridge.SendRequest{Message: "postgres", TurnID: turn}, nil)
			if err != nil || res.Status != bridge.StatusDelivered {
				t.Fatalf("answer after %s's restart: %+v, %v; want delivered", restart, res, err)
			}
			answered(t, b, w, turn, "postgres")
		})
	}
}

// TestMissedAskAcrossHosts: a worker on b asks a primary on a that has no
// waiter: it hears no_waiter, and a's gateway leaves the primary a signed
// MISSED_ASK from the remote asker that its own verification accepts.
func TestMissedAskAcrossHosts(t *testing.T) {
	c := memnettest.New(t, "a", "b")
	a, b := c.Hosts()[0], c.Hosts()[1]
	lead, w := a.Register(t, "lead", bridge.RolePrimary), b.Register(t, "w", bridge.RoleWorker)
	c.Converge(t)
	res, err := b.Core.Ask(ctx, w.GID, bridge.AskRequest{Question: "which db?", Target: "lead@a", Wait: memnettest.MaxWait}, nil)
	if err != nil || res.Status != bridge.StatusNoWaiter {
		t.Fatalf("ask: %+v, %v; want no_waiter", res, err)
	}
	got := drainUntil(t, a, lead.GID, "which db?")
	if len(got) != 1 || got[0].Kind != bridge.KindMissedAsk || got[0].From != w.GID || got[0].FromName != "w@b" || got[0].TurnID != res.TurnID {
		t.Fatalf("lead drained %+v, want w@b's MISSED_ASK of turn %s", got, res.TurnID)
	}
	if r := a.Core.Refused(); len(r) != 0 {
		t.Fatalf("a refused %v", r)
	}
}

// killedAt is a gateway's connection dropping the moment it publishes a
// notice of kind: a kill -9 after the gateway decided an ASK's fate (no
// waiter: MISSED_ASK; let go by its call: ABANDONED), before its notices
// went out or the ASK was acked.
type killedAt struct {
	*memnet.Transport
	kind bridge.Kind
}

func (k killedAt) Publish(ctx context.Context, key string, env *bridge.Envelope, mandatory bool) error {
	if env.Kind == k.kind {
		go k.Transport.Close() // it waits for this handler: the connection is closed at once, its consumers cancelled after
		for k.Transport.Connected() {
			time.Sleep(time.Millisecond)
		}
	}
	return k.Transport.Publish(ctx, key, env, mandatory)
}

// TestMissedAskCutByAKillStillTellsTheAsker: the primary's gateway dies
// between deciding that an ASK found no waiter and publishing its
// MISSED_ASK and NO_WAITER. The ASK was never acked, so the broker hands
// it back after the restart; it had already been taken into the seen-set,
// so the copy was acked as one seen before and its asker waited out the
// whole ask (the sim's "ask unresolved" under kill). The copy must be
// settled again: the asker hears no_waiter, the primary finds its
// MISSED_ASK.
func TestMissedAskCutByAKillStillTellsTheAsker(t *testing.T) {
	c := memnettest.New(t, "b")
	b := c.Hosts()[0]
	a := c.Start("a", func(cfg *bridge.Config) {
		cfg.Transport = killedAt{cfg.Transport.(*memnet.Transport), bridge.KindMissedAsk}
	})
	lead, w := a.Register(t, "lead", bridge.RolePrimary), b.Register(t, "w", bridge.RoleWorker)
	c.Converge(t)
	res, err := b.Core.Ask(ctx, w.GID, bridge.AskRequest{Question: "which db?", Target: "lead@a", Wait: time.Millisecond}, nil)
	if err != nil || res.Status != bridge.StatusPending {
		t.Fatalf("ask: %+v, %v; want pending", res, err)
	}
	memnettest.Eventually(t, "a's connection drops at the MISSED_ASK", func() bool { return !a.Transport.Connected() })
	a = c.Restart(a)
	a.Register(t, "lead", bridge.RolePrimary) // its relay re-attaches: same entity
	got, err := b.Core.Ask(ctx, w.GID, bridge.AskRequest{TurnID: res.TurnID, Wait: 3 * time.Second}, nil)
	if err != nil || got.Status != bridge.StatusNoWaiter {
		t.Fatalf("resumed ask: %+v, %v; want no_waiter", got, err)
	}
	missed := drainUntil(t, a, lead.GID, "which db?")
	if len(missed) != 1 || missed[0].Kind != bridge.KindMissedAsk || missed[0].TurnID != res.TurnID {
		t.Fatalf("lead drained %+v, want the MISSED_ASK of turn %s", missed, res.TurnID)
	}
}

// TestAbandonedAskCutByAKillAsksAgain: a poll took an ASK and its client
// never read it (the handover settled not delivered); the gateway dies
// while it tells the asker ABANDONED, before the ASK is acked. The ASK
// was taken into the seen-set all the same, so the copy the broker hands
// back after the restart was acked as one seen before and its asker
// waited out the whole ask. The copy must ask again: here, with nobody
// waiting, the asker hears no_waiter.
func TestAbandonedAskCutByAKillAsksAgain(t *testing.T) {
	c := memnettest.New(t, "b")
	b := c.Hosts()[0]
	a := c.Start("a", func(cfg *bridge.Config) {
		cfg.Transport = killedAt{cfg.Transport.(*memnet.Transport), bridge.KindAbandoned}
	})
	lead, w := a.Register(t, "lead", bridge.RolePrimary), b.Register(t, "w", bridge.RoleWorker)
	c.Converge(t)
	unread := &bridge.Handover{}
	polled := make(chan *bridge.Result, 1)
	go func() {
		r, _ := a.Core.Poll(bridge.WithHandover(ctx, unread), lead.GID, bridge.PollRequest{Wait: memnettest.MaxWait}, nil)
		polled <- r
	}()
	memnettest.Eventually(t, "lead long-polls", func() bool { _, waiting := a.Core.Held(lead.GID); return waiting })
	res, err := b.Core.Ask(ctx, w.GID, bridge.AskRequest{Question: "which db?", Target: "lead@a", Wait: time.Millisecond}, nil)
	if err != nil || res.Status != bridge.StatusPending {
		t.Fatalf("ask: %+v, %v; want pending", res, err)
	}
	if got := <-polled; got == nil || got.TurnID != res.TurnID {
		t.Fatalf("lead polled %+v, want the ASK of turn %s", got, res.TurnID)
	}
	unread.Settle(false)
	memnettest.Eventually(t, "a's connection drops at the ABANDONED", func() bool { return !a.Transport.Connected() })
	a = c.Restart(a)
	a.Register(t, "lead", bridge.RolePrimary)
	got, err := b.Core.Ask(ctx, w.GID, bridge.AskRequest{TurnID: res.TurnID, Wait: 3 * time.Second}, nil)
	if err != nil || got.Status != bridge.StatusNoWaiter {
		t.Fatalf("resumed ask: %+v, %v; want no_waiter", got, err)
	}
}
