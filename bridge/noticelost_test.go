package bridge_test

// Notices are published mandatory (issue 20, item 4): one no inbox takes
// is logged with its ids, counted (its publish Event's status) and
// recorded in the dead-letter log — never lost silently.

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/internal/testlog"
)

// TestNoticeUnroutableRecorded: an ASK from an entity with no inbox reaches
// a worker nobody is polling for; the NO_WAITER back to the asker has
// nowhere to go, and says so in the log, the events and `dlq list`.
func TestNoticeUnroutableRecorded(t *testing.T) {
	rec := &recorder{}
	logs := &testlog.Buffer{}
	h := newHarness(t, func(c *bridge.Config) {
		c.Observer = rec
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	w := h.reg("w", bridge.RoleWorker)
	ghost := uuid.NewString() // an asker whose inbox is gone
	ask := h.rawEnv(bridge.KindAsk, ghost, w.GID, "anyone there?")
	ask.TurnID = uuid.NewString()
	h.publishRaw(w.GID, ask)
	var dead bridge.DeadLetterRecord
	eventually(t, "the unroutable NO_WAITER is in the dead-letter log", func() bool {
		dls, err := h.c.DeadLetters(10)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range dls {
			if d.Kind == string(bridge.KindNoWaiter) && d.To == ghost {
				dead = d
				return true
			}
		}
		return false
	})
	if !strings.HasPrefix(dead.Reason, bridge.ReasonUnroutable+":") || !strings.Contains(dead.Reason, ask.MsgID) || dead.Queue != bridge.InboxQueueName(ghost) {
		t.Fatalf("dead-letter record %+v: want reason unroutable naming the ask %s, queue the asker's inbox", dead, ask.MsgID)
	}
	counted := false
	for _, e := range rec.snapshot() {
		if e.Hop == bridge.HopPublish && e.MsgID == dead.MsgID && strings.HasPrefix(e.Status, bridge.StatusNoticeUnroutable) {
			counted = true
		}
	}
	if !counted {
		t.Fatalf("no publish event of %s with status %q…: the counter would miss it", dead.MsgID, bridge.StatusNoticeUnroutable)
	}
	line := ""
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "notice unroutable") {
			line = l
		}
	}
	for _, want := range []string{"msgId=" + dead.MsgID, "corr=" + ask.MsgID, "kind=" + string(bridge.KindNoWaiter), "to=" + ghost} {
		if !strings.Contains(line, want) {
			t.Fatalf("log line %q lacks %s", line, want)
		}
	}
}

// snapshot copies the events recorded so far.
func (r *recorder) snapshot() []bridge.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]bridge.Event(nil), r.ev...)
}
