package bridge_test

// MISSED_ASK (missedask.go): an ASK answered NO_WAITER leaves a notice in the
// asked entity's inbox — held, counted, nudged, peeked, drained (filtered
// on its from), not answerable, and kept once across a restart.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
)

// missAsk has w ask target while it has no waiter: the ask returns
// no_waiter with its turn.
func missAsk(t *testing.T, h *harness, w bridge.Entity, target, question string) *bridge.Result {
	t.Helper()
	res, err := h.c.Ask(context.Background(), w.GID, bridge.AskRequest{Question: question, Target: target, Wait: 3 * time.Second}, nil)
	if err != nil {
		t.Fatalf("ask %s: %v", target, err)
	}
	wantStatus(t, "ask with nobody waiting", res, bridge.StatusNoWaiter)
	if res.TurnID == "" || res.MsgID == "" {
		t.Fatalf("no_waiter result %+v lacks its turn or msgId", res)
	}
	return res
}

// wantMissed checks that ms is exactly the MISSED_ASK that asked left from w.
func wantMissed(t *testing.T, what string, ms []bridge.Message, w bridge.Entity, asked *bridge.Result, question string) {
	t.Helper()
	if len(ms) != 1 {
		t.Fatalf("%s: %d messages %+v, want the one MISSED_ASK", what, len(ms), ms)
	}
	m := ms[0]
	if m.Kind != bridge.KindMissedAsk || m.From != w.GID || m.FromName != w.Name || m.Body != question ||
		m.TurnID != asked.TurnID || m.Corr != asked.MsgID || m.TraceID != asked.TraceID {
		t.Fatalf("%s: %+v, want MISSED_ASK from %s, body %q, turn %s, corr %s, trace %s", what, m, w.Name, question, asked.TurnID, asked.MsgID, asked.TraceID)
	}
}

func TestMissedAskHeldNudgedAndDrained(t *testing.T) {
	n := &chanNudger{ch: make(chan nudge, 16)}
	h := newHarness(t, func(c *bridge.Config) { c.Nudger = n })
	p, w := pair(h)
	asked := missAsk(t, h, w, "p", "which db?")
	// the NO_WAITER notice (data, in messages) tells the asker its question is kept
	if len(asked.Messages) != 1 || asked.Messages[0].Kind != bridge.KindNoWaiter || !strings.Contains(asked.Messages[0].Body, "MISSED_ASK") {
		t.Errorf("no_waiter result %q %+v does not carry the notice telling the asker its question is kept", asked.Reason, asked.Messages)
	}
	h.heldFor("p", 1)
	select {
	case got := <-n.ch:
		if got.e.GID != p.GID || got.s.Total != 1 || len(got.s.From) != 1 || got.s.From[0].FromName != "w" {
			t.Fatalf("nudge %+v, want p told of 1 held from w", got)
		}
	case <-time.After(bound):
		t.Fatal("p was not nudged about the missed ask")
	}
	peeked := h.poll(p, bridge.PollRequest{Peek: true}) // what the inbox resource shows
	wantMissed(t, "peek", peeked.Messages, w, asked, "which db?")

	late := h.answer(p, asked.TurnID, "postgres")
	wantStatus(t, "answer to a missed ask", late, bridge.StatusTooLate)
	if !strings.Contains(late.Reason, "bridge_send") || !strings.Contains(late.Reason, "w") {
		t.Errorf("too_late reason %q does not say to reply to w with bridge_send", late.Reason)
	}

	got := h.poll(p, bridge.PollRequest{})
	wantStatus(t, "poll", got, bridge.StatusDrained)
	wantMissed(t, "poll", got.Messages, w, asked, "which db?")
	if got.Held != nil {
		t.Fatalf("held after the drain: %+v", got.Held)
	}
	eventually(t, "the drained notice acked", func() bool { return h.tr.Depth(p.GID) == 0 })
}

func TestMissedAskFilteredDrain(t *testing.T) {
	h := newHarness(t, nil)
	p, w := pair(h)
	w2 := h.reg("w2", bridge.RoleWorker)
	asked := missAsk(t, h, w, "p", "from w")
	h.send(w2, bridge.SendRequest{Target: "p", Message: "report from w2"})
	h.heldFor("p", 2)
	if got := h.poll(p, bridge.PollRequest{Target: "w2"}); len(got.Messages) != 1 || got.Messages[0].Body != "report from w2" {
		t.Fatalf("poll(target=w2) got %+v", got.Messages)
	}
	got := h.poll(p, bridge.PollRequest{Target: "w"})
	wantMissed(t, "poll(target=w)", got.Messages, w, asked, "from w")
}

// A long poll opened after the ASK went unanswered takes its notice.
func TestMissedAskWakesALongPoll(t *testing.T) {
	h := newHarness(t, nil)
	p, w := pair(h)
	asked := missAsk(t, h, w, "p", "still there?")
	got := h.poll(p, bridge.PollRequest{Wait: 3 * time.Second})
	wantMissed(t, "long poll", got.Messages, w, asked, "still there?")
}

func TestMissedAskSurvivesRestartOnce(t *testing.T) {
	h := newHarness(t, nil)
	p, w := pair(h)
	asked := missAsk(t, h, w, "p", "which db?")
	h.heldFor("p", 1)
	spilled(h, p.GID) // the notice moved to the store, the ASK acked
	note := h.poll(p, bridge.PollRequest{Peek: true}).Messages[0]

	h.restart()
	h.heldFor("p", 1)
	eventually(t, "p's inbox empty: no second NO_WAITER or notice", func() bool { return h.tr.Depth(p.GID) == 0 })
	// a second copy of the notice — what a crash between its publish and
	// the ASK's ack would bring — is refused by its msgId, not held twice
	dup := h.rawEnv(bridge.KindMissedAsk, w.GID, p.GID, "which db?")
	dup.MsgID, dup.Corr, dup.TurnID = note.MsgID, asked.MsgID, asked.TurnID
	h.publishRaw(p.GID, dup)
	eventually(t, "the copy refused", func() bool { return h.c.Refused()[bridge.RefuseReplayed] == 1 })
	h.heldFor("p", 1)

	wantStatus(t, "answer after the restart", h.answer(p, asked.TurnID, "postgres"), bridge.StatusTooLate)
	got := h.poll(p, bridge.PollRequest{})
	wantMissed(t, "poll after the restart", got.Messages, w, asked, "which db?")
	h.restart()
	h.heldFor("p", 0)
}

// Only a gateway leaves a MISSED_ASK, in its own inboxes.
func TestMissedAskFromAnotherHostRefused(t *testing.T) {
	h := newHarness(t, nil)
	p, w := pair(h)
	forged := h.rawEnv(bridge.KindMissedAsk, w.GID, p.GID, "forged")
	forged.Host, forged.Corr, forged.TurnID = "h2", uuid.NewString(), uuid.NewString()
	h.publishRaw(p.GID, forged)
	eventually(t, "the forged notice refused", func() bool { return h.c.Refused()[bridge.RefuseBadKind] == 1 })
	h.heldFor("p", 0)
}
