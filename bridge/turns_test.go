package bridge_test

// Open turns survive a gateway restart (turnbook.go): the asker's open ask
// resumes and takes its answer; the asked entity can still answer what it
// received; persisted turns expire and are forgotten; the re-attach grace
// counts from the restart.

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/store"
)

// pendingAsk has w ask p while p long-polls, with a wait that runs out at
// once: the ask is open (pending) and p holds its turn.
func pendingAsk(t *testing.T, h *harness, p, w bridge.Entity, timeout time.Duration) string {
	t.Helper()
	pl := async(func() (*bridge.Result, error) {
		return h.c.Poll(context.Background(), p.GID, bridge.PollRequest{Wait: 3 * time.Second}, nil)
	})
	h.waitingOn(p.Name)
	res, err := h.c.Ask(context.Background(), w.GID, bridge.AskRequest{Question: "which db?", Target: p.GID, Timeout: timeout, Wait: time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "ask", res, bridge.StatusPending)
	if got := awaitOK(t, "poll", pl); got.TurnID != res.TurnID {
		t.Fatalf("p received turn %q, want %s", got.TurnID, res.TurnID)
	}
	return res.TurnID
}

// resume is w's bridge_ask(turn_id) as a call that waits.
func resume(h *harness, w bridge.Entity, turn string) <-chan outcome {
	return async(func() (*bridge.Result, error) {
		return h.c.Ask(context.Background(), w.GID, bridge.AskRequest{TurnID: turn, Wait: 3 * time.Second}, nil)
	})
}

// restartAttached restarts the gateway and re-attaches es at once, as
// their relays do.
func (h *harness) restartAttached(es ...bridge.Entity) {
	h.t.Helper()
	h.restart()
	for _, e := range es {
		h.c.Attach(e.GID)
	}
}

// storedTurns is what the state store keeps of turns.
func (h *harness) storedTurns() []store.Turn {
	h.t.Helper()
	got, err := h.st.LoadTurns(func(store.Turn) bool { return true })
	if err != nil {
		h.t.Fatal(err)
	}
	return got
}

func TestOpenAskSurvivesRestart(t *testing.T) {
	h := newHarness(t, nil)
	p, w := pair(h)
	turn := pendingAsk(t, h, p, w, 0)
	if n := len(h.storedTurns()); n != 2 {
		t.Fatalf("%d turns persisted, want 2 (w's ask and p's received turn)", n)
	}
	h.restart()
	again := resume(h, w, turn) // the asker's side: its ask is open again
	wantStatus(t, "answer after the restart", h.answer(p, turn, "postgres"), bridge.StatusDelivered)
	got := awaitOK(t, "resumed ask", again)
	wantStatus(t, "resumed ask", got, bridge.StatusAnswered)
	if !slices.Equal(bodies(got), []string{"postgres"}) || got.Messages[0].From != p.GID {
		t.Fatalf("resumed ask got %+v", got.Messages)
	}
	wantStatus(t, "second answer", h.answer(p, turn, "mysql"), bridge.StatusAlreadyAnswered)
}

// The answer lands while nobody waits on the ask, then the gateway
// restarts: the answer was persisted with the turn.
func TestAnswerKeptAcrossRestartUntilResumed(t *testing.T) {
	h := newHarness(t, nil)
	p, w := pair(h)
	turn := pendingAsk(t, h, p, w, 0)
	wantStatus(t, "answer", h.answer(p, turn, "postgres"), bridge.StatusDelivered)
	h.restart()
	got := awaitOK(t, "resumed ask", resume(h, w, turn))
	wantStatus(t, "resumed ask", got, bridge.StatusAnswered)
	if !slices.Equal(bodies(got), []string{"postgres"}) || got.Messages[0].Kind != bridge.KindAnswer || got.Messages[0].TurnID != turn {
		t.Fatalf("resumed ask got %+v", got.Messages)
	}
	wantStatus(t, "answer again after the restart", h.answer(p, turn, "again"), bridge.StatusAlreadyAnswered)
}

// A call cut because the gateway stops leaves its ask open; a call the
// client cancels abandons it (TestStatuses).
func TestAskCutByGatewayStopIsNotAbandoned(t *testing.T) {
	h := newHarness(t, nil)
	p, w := pair(h)
	ctx, cancel := context.WithCancel(context.Background())
	ask, turn := openAsk(ctx, t, h, p, w, 0)
	h.c.Stopping()
	cancel()
	if o := await(t, "cut ask", ask); !errors.Is(o.err, context.Canceled) {
		t.Fatalf("cut ask returned %+v, %v", o.res, o.err)
	}
	h.restart()
	again := resume(h, w, turn)
	wantStatus(t, "answer after the restart", h.answer(p, turn, "postgres"), bridge.StatusDelivered)
	wantStatus(t, "resumed ask", awaitOK(t, "resumed ask", again), bridge.StatusAnswered)
}

func TestPersistedTurnsExpire(t *testing.T) {
	h := newHarness(t, nil)
	p, w := pair(h)
	turn := pendingAsk(t, h, p, w, time.Minute)
	h.restartAttached(p, w)
	h.clk.Advance(time.Minute)
	wantStatus(t, "resumed after expiry", awaitOK(t, "resume", resume(h, w, turn)), bridge.StatusExpired)
	wantStatus(t, "answer after expiry", h.answer(p, turn, "late"), bridge.StatusTooLate)

	h.clk.Advance(2 * time.Minute) // past the linger: forgotten, in memory and on disk
	eventually(t, "expired turns deleted", func() bool { return len(h.storedTurns()) == 0 })
	forgotten(t, h, w, turn)
}

// forgotten checks that w's turn is gone: resuming it is a user error.
func forgotten(t *testing.T, h *harness, w bridge.Entity, turn string) {
	t.Helper()
	if _, err := h.c.Ask(context.Background(), w.GID, bridge.AskRequest{TurnID: turn}, nil); !isUserError(err) {
		t.Fatalf("resume of a forgotten turn: %v, want a user error", err)
	}
}

// Turns that expired while the gateway was down are dropped at start.
func TestTurnsExpiredWhileDownDropped(t *testing.T) {
	h := newHarness(t, nil)
	p, w := pair(h)
	turn := pendingAsk(t, h, p, w, time.Minute)
	if err := h.c.Close(); err != nil {
		t.Fatal(err)
	}
	h.clk.Advance(3 * time.Minute)
	h.start()
	if got := h.storedTurns(); len(got) != 0 {
		t.Fatalf("%d turns left after a start past their expiry", len(got))
	}
	forgotten(t, h, w, turn)
}

// A restart detaches everyone: re-attaching within ReattachGrace keeps the
// turns; not coming back abandons them after it, as a closed session does.
func TestRestartCountsReattachGrace(t *testing.T) {
	t.Run("back within the grace", func(t *testing.T) {
		h := newHarness(t, nil)
		p, w := pair(h)
		turn := pendingAsk(t, h, p, w, time.Hour)
		h.restartAttached(p, w)
		markSweep(h, p, w)
		h.clk.Advance(h.c.Config().ReattachGrace + time.Second)
		h.heldFor("p", 0)
		h.heldFor("w", 0)
		again := resume(h, w, turn)
		wantStatus(t, "answer", h.answer(p, turn, "postgres"), bridge.StatusDelivered)
		wantStatus(t, "resumed ask", awaitOK(t, "resume", again), bridge.StatusAnswered)
	})
	t.Run("the asked entity never comes back", func(t *testing.T) {
		h := newHarness(t, nil)
		p, w := pair(h)
		turn := pendingAsk(t, h, p, w, time.Hour)
		h.restart()
		h.c.Attach(w.GID)
		again := resume(h, w, turn)
		h.clk.Advance(h.c.Config().ReattachGrace + time.Second)
		wantStatus(t, "resumed ask", awaitOK(t, "resume", again), bridge.StatusAbandoned)
	})
}

// markSweep holds for each of es a message that expires before the clock
// is next advanced; once it is gone, the sweeper has passed that entity
// (its expiry and its grace are checked in one step) after the advance.
func markSweep(h *harness, es ...bridge.Entity) {
	h.t.Helper()
	for _, e := range es {
		m := h.rawEnv(bridge.KindReply, uuid.NewString(), e.GID, "marker")
		m.ExpiresAt = m.TS.Add(time.Second)
		h.publishRaw(e.GID, m)
		h.heldFor(e.Name, 1)
	}
}

// TestAskHandedToACallCutByACrashIsShownAgain: an ASK handed to a poll
// whose result never reached its client (the gateway died first: the
// handover never settled) comes back after the restart. It was acked on
// arrival, so the primary never saw the question again and its asker
// waited out the ask (the sim's "ask unresolved" under kill); now it is
// shown again — here, with nobody waiting, answered NO_WAITER and left as
// a MISSED_ASK.
func TestAskHandedToACallCutByACrashIsShownAgain(t *testing.T) {
	h := newHarness(t, nil)
	p, w := pair(h)
	cut := &bridge.Handover{} // never settled: the crash took the connection
	pl := async(func() (*bridge.Result, error) {
		return h.c.Poll(bridge.WithHandover(context.Background(), cut), p.GID, bridge.PollRequest{Wait: 3 * time.Second}, nil)
	})
	h.waitingOn(p.Name)
	res, err := h.c.Ask(context.Background(), w.GID, bridge.AskRequest{Question: "which db?", Target: p.GID, Wait: time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := awaitOK(t, "poll", pl); got.TurnID != res.TurnID {
		t.Fatalf("p received turn %q, want %s", got.TurnID, res.TurnID)
	}
	h.restartAttached(p, w)
	got := awaitOK(t, "resumed ask", resume(h, w, res.TurnID))
	wantStatus(t, "resumed ask", got, bridge.StatusNoWaiter)
	missed := h.poll(p, bridge.PollRequest{Max: 10})
	if len(missed.Messages) != 1 || missed.Messages[0].Kind != bridge.KindMissedAsk || missed.Messages[0].TurnID != res.TurnID {
		t.Fatalf("p drained %+v, want the question again as a MISSED_ASK", missed.Messages)
	}
}
