package bridge_test

// Notices are published mandatory (issue 20, item 4): one no inbox takes
// is logged with its ids, counted (its publish Event's status) and
// recorded in the dead-letter log — never lost silently.

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker"
	"github.com/herdbridge/herdbridge/bridge/broker/brokertest"
	"github.com/herdbridge/herdbridge/internal/testlog"
)

// TestNoticeUnroutableRecorded: an ASK from an entity with no inbox reaches
// a worker nobody is polling for; the NO_WAITER back to the asker has
// nowhere to go, and says so in the log, the events and `dlq list`.
func TestNoticeUnroutableRecorded(t *testing.T) {
	unroutableNotice(t, nil, func(h *harness, env *bridge.Envelope) { h.publishRaw(env.To, env) })
}

// TestNoticeUnroutableRecordedOnBroker: the same over a real RabbitMQ,
// where an unroutable mandatory publish comes back as basic.return (with
// CI set and no broker, it fails).
func TestNoticeUnroutableRecordedOnBroker(t *testing.T) {
	url := brokertest.URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	tr, err := broker.Open(ctx, broker.Options{URL: url, Heartbeat: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	unroutableNotice(t, func(c *bridge.Config) {
		c.Transport, c.Host = tr, "notice-"+uuid.NewString()[:8]
	}, func(_ *harness, env *bridge.Envelope) {
		if err := tr.Publish(context.Background(), env.To, env, true); err != nil {
			t.Fatalf("publishing the ASK: %v", err)
		}
	})
}

// unroutableNotice runs the case on a harness modified by mod, publishing
// the ASK with publish.
func unroutableNotice(t *testing.T, mod func(*bridge.Config), publish func(*harness, *bridge.Envelope)) {
	rec := &recorder{}
	logs := &testlog.Buffer{}
	h := newHarness(t, func(c *bridge.Config) {
		c.Observer = rec
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
		if mod != nil {
			mod(c)
		}
	})
	w := h.reg("w", bridge.RoleWorker)
	ghost := uuid.NewString() // an asker whose inbox is gone
	ask := h.rawEnv(bridge.KindAsk, ghost, w.GID, "anyone there?")
	ask.TurnID = uuid.NewString()
	publish(h, ask)
	dead := unroutableDeadLetter(t, h, ghost)
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

// unroutableDeadLetter waits for the dead-letter record of the NO_WAITER
// to ghost.
func unroutableDeadLetter(t *testing.T, h *harness, ghost string) bridge.DeadLetterRecord {
	t.Helper()
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
	return dead
}

// snapshot copies the events recorded so far.
func (r *recorder) snapshot() []bridge.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]bridge.Event(nil), r.ev...)
}
