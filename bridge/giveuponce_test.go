package bridge_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/store"
)

// TestGivenUpFailedOnceAfterDrain: a brief given up on this host whose
// ledger record outlives its FAILED — the sweeper's later (a deadline
// moved after the give-up) wrote the record back after the FAILED's
// arrival had deleted it, and a kill -9 restarted the gateway on it — is
// given up again after the restart. The sender drained the first FAILED
// meanwhile, so nothing held stops the second: TestForwardCrashWindow saw
// "brief-0175 reported twice: FAILED then FAILED". The repeat must be the
// same notice (one msgId per brief), refused by the sender's seen-set.
func TestGivenUpFailedOnceAfterDrain(t *testing.T) {
	h := newHarness(t, func(c *bridge.Config) { c.ReceiptWait = 100 * time.Millisecond })
	w := h.reg("w", bridge.RoleWorker)
	s := h.reg("s", bridge.RolePrimary)
	now := h.clk.Now()
	a := store.Await{MsgID: uuid.NewString(), From: s.GID, To: w.GID, ToName: "w", TraceID: uuid.NewString(),
		Excerpt: `"lost brief"`, Deadline: now.Add(-time.Second), ExpiresAt: now.Add(time.Hour), ToHost: "h1"}
	failedOf := func(round string) []bridge.Message {
		t.Helper()
		if err := h.st.PutAwait(a); err != nil {
			t.Fatal(err)
		}
		h.restart() // the record is loaded, and due
		var got []bridge.Message
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			for _, m := range h.poll(s, bridge.PollRequest{Wait: 200 * time.Millisecond, Max: 50}).Messages {
				if m.Kind == bridge.KindFailed && m.Corr == a.MsgID {
					got = append(got, m)
				}
			}
		}
		t.Logf("%s: %d FAILED", round, len(got))
		return got
	}
	first := failedOf("first give-up")
	if len(first) != 1 || !strings.Contains(first[0].Body, bridge.GivenUpMark) {
		t.Fatalf("first give-up: %d FAILEDs, want 1 given up: %+v", len(first), first)
	}
	if again := failedOf("after the restart"); len(again) != 0 {
		t.Fatalf("the sender was told FAILED again after it drained the first: %q", again[0].Body)
	}
}

// TestGivenUpFailedHeldSurvivesRestart: a given-up FAILED held for its
// sender and not drained yet is still in the transport (not yet spilled);
// its arrival settled the brief's ledger record, so after a restart
// nothing awaits the copy the transport hands back. It must be held again,
// not dropped as a repeated give-up answer: the sender would never hear.
func TestGivenUpFailedHeldSurvivesRestart(t *testing.T) {
	h := newHarness(t, func(c *bridge.Config) { c.ReceiptWait, c.SpillDelay = 100*time.Millisecond, time.Hour })
	w := h.reg("w", bridge.RoleWorker)
	s := h.reg("s", bridge.RolePrimary)
	now := h.clk.Now()
	a := store.Await{MsgID: uuid.NewString(), From: s.GID, To: w.GID, ToName: "w", TraceID: uuid.NewString(),
		Excerpt: `"lost brief"`, Deadline: now.Add(-time.Second), ExpiresAt: now.Add(time.Hour), ToHost: "h1"}
	if err := h.st.PutAwait(a); err != nil {
		t.Fatal(err)
	}
	h.restart()
	h.heldFor("s", 1) // the FAILED, held in the transport
	h.restart()
	var got int
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		for _, m := range h.poll(s, bridge.PollRequest{Wait: 200 * time.Millisecond, Max: 50}).Messages {
			if m.Kind == bridge.KindFailed && m.Corr == a.MsgID {
				got++
			}
		}
	}
	if got != 1 {
		t.Fatalf("%d given-up FAILEDs after the restart, want 1", got)
	}
}
