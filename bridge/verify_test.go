package bridge_test

import (
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// TestExpiredSendReplayedFailsOnce: an expired SEND is refused and its
// sender told FAILED once; twenty replays of it are refused and counted but
// write nothing more to the sender.
func TestExpiredSendReplayedFailsOnce(t *testing.T) {
	h := newHarness(t, nil)
	p, w := pair(h)
	e := h.rawEnv(bridge.KindSend, p.GID, w.GID, "too old")
	e.TS, e.ExpiresAt = e.TS.Add(-time.Hour), e.TS.Add(-10*time.Minute) // beyond the 2 min allowance
	for i := 0; i < 21; i++ {
		h.publishRaw(w.GID, e)
	}
	eventually(t, "21 refused as expired", func() bool { return h.c.Refused()[bridge.RefuseExpired] == 21 })
	got := h.poll(p, bridge.PollRequest{Max: 100, Wait: 200 * time.Millisecond})
	if len(got.Messages) != 1 || got.Messages[0].Kind != bridge.KindFailed || !strings.Contains(got.Messages[0].Body, "expired") {
		t.Fatalf("sender got %+v, want one FAILED", got.Messages)
	}
	if again := h.poll(p, bridge.PollRequest{Wait: 200 * time.Millisecond}); len(again.Messages) != 0 {
		t.Fatalf("more FAILEDs: %+v", again.Messages)
	}
}

// TestReplayRefusedAfterRestart: the seen-set survives a restart of the
// gateway, so a message it took before is refused as a replay after.
func TestReplayRefusedAfterRestart(t *testing.T) {
	h := newHarness(t, nil)
	p, w := pair(h)
	e := h.rawEnv(bridge.KindReply, w.GID, p.GID, "once only")
	h.publishRaw(p.GID, e)
	if got := h.poll(p, bridge.PollRequest{Wait: 3 * time.Second}); len(got.Messages) != 1 {
		t.Fatalf("first copy: %+v", got.Messages)
	}
	h.restart()
	h.publishRaw(p.GID, e)
	eventually(t, "the replay refused", func() bool { return h.c.Refused()[bridge.RefuseReplayed] == 1 })
	if got := h.poll(p, bridge.PollRequest{Wait: 200 * time.Millisecond}); len(got.Messages) != 0 {
		t.Fatalf("replay delivered after a restart: %+v", got.Messages)
	}
}
