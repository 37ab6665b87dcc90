package bridge_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/store"
)

// controlSpy is a transport that also takes control messages
// (bridge.ControlTransport) and keeps them: what another host's control
// queue would get.
type controlSpy struct {
	bridge.Transport
	mu   sync.Mutex
	sent []*bridge.Envelope
}

func (s *controlSpy) PublishControl(_ context.Context, host string, env *bridge.Envelope) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, env.Clone())
	return nil
}

func (s *controlSpy) ConsumeControl(context.Context, string, func(bridge.Delivery)) (bridge.Subscription, error) {
	return nopSub{}, nil
}

type nopSub struct{}

func (nopSub) Cancel() {}

func (s *controlSpy) of(kind bridge.Kind) []*bridge.Envelope {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*bridge.Envelope
	for _, e := range s.sent {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// TestGiveUpWireHoldsNoBriefText: the GIVE_UP a sender's gateway sends
// to the worker's host (control.<host>, never sealed: gateway to gateway)
// carries the brief's ids and expiry but not its start, which the broker
// would otherwise read in clear; the sender keeps the excerpt in its own
// ledger.
func TestGiveUpWireHoldsNoBriefText(t *testing.T) {
	spy := &controlSpy{}
	h := newHarness(t, func(c *bridge.Config) {
		spy.Transport = c.Transport
		c.Transport = spy
		c.ReceiptWait = 100 * time.Millisecond
	})
	s := h.reg("s", bridge.RolePrimary)
	now := h.clk.Now()
	a := store.Await{MsgID: uuid.NewString(), From: s.GID, To: uuid.NewString(), ToName: "w", TraceID: uuid.NewString(),
		Excerpt: `"GIVEUPSECRET brief text"`, Deadline: now.Add(-time.Second), ExpiresAt: now.Add(time.Hour), ToHost: "h2"}
	if err := h.st.PutAwait(a); err != nil {
		t.Fatal(err)
	}
	h.restart() // the record is loaded, and due
	var got []*bridge.Envelope
	for deadline := time.Now().Add(3 * time.Second); len(got) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		got = spy.of(bridge.KindGiveUp)
	}
	if len(got) == 0 {
		t.Fatal("no GIVE_UP sent to h2")
	}
	for _, e := range got {
		if e.Corr != a.MsgID {
			t.Fatalf("GIVE_UP corr %s, want %s", e.Corr, a.MsgID)
		}
		if bytes.Contains(e.Body, []byte("GIVEUPSECRET")) {
			t.Fatalf("a GIVE_UP's wire body holds the brief's text: %s", e.Body)
		}
	}
}
