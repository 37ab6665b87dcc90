package bridge_test

// Tests of idempotent calls (request_id on bridge_send, bridge_broadcast
// and bridge_ask): a repeat publishes nothing and shows the first call's
// message and current status; a call that published nothing is not
// remembered; ids are per entity, expire after 24 h and survive a restart.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/embedded"
)

// gatedTransport is the embedded transport whose publishes of SEND can be
// held at a gate (gate non-nil: Publish waits for a value, and fails with
// it unless nil) and counted.
type gatedTransport struct {
	*embedded.Transport
	arrived chan struct{} // a SEND reached the gate
	mu      sync.Mutex
	gate    chan error
	sends   int
}

func (g *gatedTransport) Publish(ctx context.Context, key string, env *bridge.Envelope, mandatory bool) error {
	if env.Kind == bridge.KindSend {
		g.mu.Lock()
		gate := g.gate
		g.mu.Unlock()
		if gate != nil {
			g.arrived <- struct{}{}
			if err := <-gate; err != nil {
				return err
			}
		}
		g.mu.Lock()
		g.sends++
		g.mu.Unlock()
	}
	return g.Transport.Publish(ctx, key, env, mandatory)
}

func (g *gatedTransport) setGate(ch chan error) {
	g.mu.Lock()
	g.gate = ch
	g.mu.Unlock()
}

func (g *gatedTransport) published() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.sends
}

func gatedHarness(t *testing.T, mod func(*bridge.Config)) (*harness, *gatedTransport) {
	var gt *gatedTransport
	h := newHarness(t, func(cfg *bridge.Config) {
		gt = &gatedTransport{Transport: cfg.Transport.(*embedded.Transport), arrived: make(chan struct{}, 4)}
		cfg.Transport = gt
		if mod != nil {
			mod(cfg)
		}
	})
	return h, gt
}

func wantDeduped(t *testing.T, what string, first, again *bridge.Result) {
	t.Helper()
	if !again.Deduped || again.MsgID != first.MsgID || again.TraceID != first.TraceID {
		t.Fatalf("%s: repeat %+v, want deduped with msgId %s", what, again, first.MsgID)
	}
	if first.Deduped {
		t.Fatalf("%s: the first call says deduped", what)
	}
}

// TestRequestIDDedups: a repeated send, broadcast and ask publish once and
// the repeat shows the first call's message and status.
func TestRequestIDDedups(t *testing.T) {
	h, gt := gatedHarness(t, nil)
	p, w := pair(h)
	h.reg("other", bridge.RolePrimary)
	req := bridge.SendRequest{Target: "w", Message: "brief", RequestID: "r-1"}
	first := h.send(p, req)
	again := h.send(p, req)
	wantDeduped(t, "send", first, again)
	wantStatus(t, "repeated send", again, bridge.StatusConfirmed)
	if again.Target != "w@h1" || !strings.Contains(again.Next, "bridge_poll(target=w@h1") {
		t.Fatalf("repeat target %q next %q", again.Target, again.Next)
	}
	if n := gt.published(); n != 1 {
		t.Fatalf("%d SENDs published, want 1", n)
	}
	h.heldFor("w", 1)

	ctx := context.Background()
	breq := bridge.BroadcastRequest{Message: "hello", RequestID: "b-1"}
	b1, err := h.c.Broadcast(ctx, p.GID, breq)
	if err != nil {
		t.Fatal(err)
	}
	b2, err := h.c.Broadcast(ctx, p.GID, breq)
	if err != nil {
		t.Fatal(err)
	}
	wantDeduped(t, "broadcast", b1, b2)
	h.heldFor("other", 1)
	h.heldFor("w", 2)

	// nobody waits in p: the ask ends no_waiter, and its repeat says so
	areq := bridge.AskRequest{Question: "which db?", Target: "p", Wait: time.Second, RequestID: "a-1"}
	a1, err := h.c.Ask(ctx, w.GID, areq, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "ask", a1, bridge.StatusNoWaiter)
	a2, err := h.c.Ask(ctx, w.GID, areq, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantDeduped(t, "ask", a1, a2)
	wantStatus(t, "repeated ask", a2, bridge.StatusNoWaiter)
	if a2.TurnID != a1.TurnID {
		t.Fatalf("repeated ask turn %s, want %s", a2.TurnID, a1.TurnID)
	}
}

// TestRequestIDRepeatWhileOpen: a repeat while the first send still waits
// for its reply returns at once what is known (it does not compete with
// the open call for the reply), and the reply still ends the first call.
func TestRequestIDRepeatWhileOpen(t *testing.T) {
	h, gt := gatedHarness(t, nil)
	p, w := pair(h)
	req := bridge.SendRequest{Target: "w", Message: "brief", Wait: 3 * time.Second, RequestID: "open-1"}
	first := async(func() (*bridge.Result, error) { return h.c.Send(context.Background(), p.GID, req, nil) })
	h.waitingOn("p")
	again := h.send(p, req)
	if !again.Deduped || again.Status != bridge.StatusConfirmed || !strings.Contains(again.Next, "bridge_poll") {
		t.Fatalf("repeat while open: %+v", again)
	}
	h.send(w, bridge.SendRequest{Target: "p", Message: "done"})
	res := awaitOK(t, "first send", first)
	wantStatus(t, "first send", res, bridge.StatusReplied)
	if res.MsgID != again.MsgID || gt.published() != 1 {
		t.Fatalf("first %s repeat %s, %d SENDs published", res.MsgID, again.MsgID, gt.published())
	}
	// the call's outcome is the message's status from now on
	wantStatus(t, "repeat after the reply", h.send(p, req), bridge.StatusReplied)
}

// TestRequestIDRepeatWaitsForPublish: a repeat arriving while the first
// call is still publishing waits for it; that publish fails, so nothing is
// remembered and the repeat really publishes — once.
func TestRequestIDRepeatWaitsForPublish(t *testing.T) {
	h, gt := gatedHarness(t, nil)
	p, _ := pair(h)
	gate := make(chan error)
	gt.setGate(gate)
	req := bridge.SendRequest{Target: "w", Message: "brief", RequestID: "flaky-1"}
	first := async(func() (*bridge.Result, error) { return h.c.Send(context.Background(), p.GID, req, nil) })
	<-gt.arrived // the first call is publishing
	second := async(func() (*bridge.Result, error) { return h.c.Send(context.Background(), p.GID, req, nil) })
	gate <- errors.New("broker unreachable")
	if o := await(t, "failed send", first); o.err == nil {
		t.Fatalf("the failed publish returned %+v", o.res)
	}
	<-gt.arrived // the repeat, now the first, publishes
	gate <- nil
	res := awaitOK(t, "retry", second)
	if res.Deduped || res.Status != bridge.StatusConfirmed || gt.published() != 1 {
		t.Fatalf("retry after a failed publish: %+v, %d published", res, gt.published())
	}
	h.heldFor("w", 1)
}

// TestRequestIDFailedPublishRetries: a send that failed (a transport error,
// or a user error before publishing) is not remembered: the retry sends.
func TestRequestIDFailedPublishRetries(t *testing.T) {
	h, gt := gatedHarness(t, nil)
	p, _ := pair(h)
	gate := make(chan error, 1)
	gate <- errors.New("broker unreachable")
	gt.setGate(gate)
	defer func() { <-gt.arrived }()
	req := bridge.SendRequest{Target: "w", Message: "brief", RequestID: "retry-1"}
	if _, err := h.c.Send(context.Background(), p.GID, req, nil); err == nil {
		t.Fatal("the gated publish did not fail")
	}
	gt.setGate(nil)
	res := h.send(p, req)
	if res.Deduped || gt.published() != 1 {
		t.Fatalf("retry: %+v, %d published", res, gt.published())
	}
	// a user error before publishing is not remembered either
	bad := bridge.SendRequest{Target: "later", Message: "hi", RequestID: "retry-2"}
	if _, err := h.c.Send(context.Background(), p.GID, bad, nil); !isUserError(err) {
		t.Fatalf("send to an unknown target: %v", err)
	}
	h.reg("later", bridge.RolePrimary)
	if res := h.send(p, bad); res.Deduped || res.Status != bridge.StatusConfirmed {
		t.Fatalf("retry once the target exists: %+v", res)
	}
}

// TestRequestIDReusedForAnotherMessage is refused with a sentence that
// says so; another entity's same id is its own.
func TestRequestIDReusedForAnotherMessage(t *testing.T) {
	h := newHarness(t, nil)
	p, w := pair(h)
	p2 := h.reg("p2", bridge.RolePrimary)
	h.send(p, bridge.SendRequest{Target: "w", Message: "one", RequestID: "id-1"})
	for name, call := range map[string]func() error{
		"other message": func() error {
			_, err := h.c.Send(context.Background(), p.GID, bridge.SendRequest{Target: "w", Message: "two", RequestID: "id-1"}, nil)
			return err
		},
		"other target": func() error {
			_, err := h.c.Send(context.Background(), p.GID, bridge.SendRequest{Target: "p2", Message: "one", RequestID: "id-1"}, nil)
			return err
		},
		"other tool": func() error {
			_, err := h.c.Broadcast(context.Background(), p.GID, bridge.BroadcastRequest{Message: "one", RequestID: "id-1"})
			return err
		},
	} {
		err := call()
		if !isUserError(err) || !strings.Contains(err.Error(), "reused with a different message") {
			t.Fatalf("%s: %v, want a user error saying the id was reused", name, err)
		}
	}
	// the same id from another entity is independent
	if res := h.send(p2, bridge.SendRequest{Target: "w", Message: "two", RequestID: "id-1"}); res.Deduped {
		t.Fatalf("p2's id-1 deduped against p's: %+v", res)
	}
	h.heldFor("w", 2)
	_ = w
}

// TestRequestIDExpires: after 24 h the id is forgotten and a call with it
// sends anew.
func TestRequestIDExpires(t *testing.T) {
	h := newHarness(t, func(c *bridge.Config) { c.MessageTTL = 48 * time.Hour })
	p, _ := pair(h)
	req := bridge.SendRequest{Target: "w", Message: "brief", RequestID: "day-1"}
	first := h.send(p, req)
	h.clk.Advance(bridge.RequestMemory - time.Minute)
	wantDeduped(t, "within 24 h", first, h.send(p, req))
	h.clk.Advance(2 * time.Minute)
	if res := h.send(p, req); res.Deduped || res.MsgID == first.MsgID {
		t.Fatalf("after 24 h: %+v, want a new message", res)
	}
	h.heldFor("w", 2)
	// pruned from the store too: a restart remembers only the new one
	h.clk.Advance(bridge.RequestMemory + time.Minute)
	h.restart()
	if res := h.send(p, req); res.Deduped {
		t.Fatalf("after a restart 24 h later: %+v", res)
	}
}

// TestRequestIDSurvivesRestart: a repeat after a gateway restart is
// deduped against the call made before it.
func TestRequestIDSurvivesRestart(t *testing.T) {
	h, _ := gatedHarness(t, nil)
	p, _ := pair(h)
	req := bridge.SendRequest{Target: "w", Message: "brief", RequestID: "boot-1"}
	first := h.send(p, req)
	h.restart()
	again := h.send(p, req)
	wantDeduped(t, "after restart", first, again)
	if again.Target != "w@h1" {
		t.Fatalf("target after restart %q", again.Target)
	}
	h.heldFor("w", 1)
}

// gateInjector types a brief once released, and reports it submitted.
type gateInjector struct {
	started chan struct{}
	release chan struct{}
}

func (g *gateInjector) Inject(ctx context.Context, b bridge.Brief) bridge.InjectReceipt {
	g.started <- struct{}{}
	if err := b.Typing(); err != nil {
		return bridge.InjectReceipt{Status: bridge.StatusFailed, Reason: err.Error()}
	}
	select {
	case <-g.release:
		return bridge.InjectReceipt{Status: bridge.StatusSubmitted}
	case <-ctx.Done():
		return bridge.InjectReceipt{Status: bridge.StatusFailed, Reason: "cancelled"}
	}
}

// Resubmit: this injector never leaves a brief in the composer.
func (g *gateInjector) Resubmit(context.Context, bridge.Brief) bridge.InjectReceipt {
	return bridge.InjectReceipt{Status: bridge.StatusFailed, Reason: "not in the composer"}
}

// TestRequestIDStatusFollowsReceipts: a brief's first call is cut before
// its receipt; the receipt that comes later keeps the remembered status
// current, across a restart too.
func TestRequestIDStatusFollowsReceipts(t *testing.T) {
	inj := &gateInjector{started: make(chan struct{}, 1), release: make(chan struct{})}
	h := newHarness(t, func(c *bridge.Config) { c.Injector = inj; c.InjectWait = 3 * time.Second })
	ctx := context.Background()
	p := h.reg("p", bridge.RolePrimary)
	if _, _, err := h.c.Register(ctx, bridge.RegisterRequest{Name: "w", Role: bridge.RoleWorker, PaneID: "pane-1"}); err != nil {
		t.Fatal(err)
	}
	req := bridge.SendRequest{Target: "w", Message: "brief", RequestID: "brief-1"}
	cut, cancel := context.WithCancel(ctx)
	first := async(func() (*bridge.Result, error) { return h.c.Send(cut, p.GID, req, nil) })
	<-inj.started
	if again := h.send(p, req); !again.Deduped || again.Status != bridge.StatusConfirmed {
		t.Fatalf("repeat before the receipt: %+v", again)
	}
	cancel()
	if o := await(t, "cut send", first); o.err == nil {
		t.Fatalf("cut send returned %+v", o.res)
	}
	close(inj.release)
	h.heldFor("p", 1) // the INJECTED, held for the sender whose call is gone
	eventually(t, "the repeat shows the receipt's rung", func() bool {
		again := h.send(p, req)
		return again.Deduped && again.Status == bridge.StatusSubmitted
	})
	h.restart()
	if again := h.send(p, req); !again.Deduped || again.Status != bridge.StatusSubmitted {
		t.Fatalf("repeat after the receipt and a restart: %+v", again)
	}
	if len(inj.started) != 0 {
		t.Fatal("the brief was typed twice")
	}
}

// TestRequestIDResumesCutSend: a send cut while it waited for the reply
// (client gone, gateway restarted) is resumed by its repeat, which then
// ends as the first call would have: with the reply.
func TestRequestIDResumesCutSend(t *testing.T) {
	h, gt := gatedHarness(t, nil)
	p, w := pair(h)
	req := bridge.SendRequest{Target: "w", Message: "brief", Wait: 3 * time.Second, RequestID: "cut-1"}
	cut, cancel := context.WithCancel(context.Background())
	first := async(func() (*bridge.Result, error) { return h.c.Send(cut, p.GID, req, nil) })
	h.waitingOn("p")
	cancel()
	if o := await(t, "cut send", first); o.err == nil {
		t.Fatalf("cut send returned %+v", o.res)
	}
	h.restart()
	again := async(func() (*bridge.Result, error) { return h.c.Send(context.Background(), p.GID, req, nil) })
	h.waitingOn("p")
	h.send(w, bridge.SendRequest{Target: "p", Message: "done"})
	res := awaitOK(t, "resumed send", again)
	wantStatus(t, "resumed send", res, bridge.StatusReplied)
	if !res.Deduped || len(res.Messages) != 1 || res.Messages[0].Body != "done" || gt.published() != 1 {
		t.Fatalf("resumed send: %+v, %d SENDs published", res, gt.published())
	}
}

// TestRequestIDValidation: ids over 128 bytes or with control characters
// are refused with a sentence saying what to use; others are taken.
func TestRequestIDValidation(t *testing.T) {
	h := newHarness(t, nil)
	p, _ := pair(h)
	for _, tc := range []struct {
		id, want string
	}{
		{strings.Repeat("a", 129), "over the 128-byte limit"},
		{strings.Repeat("é", 65), "over the 128-byte limit"},
		{"a\x00b", "control character"},
		{"line\nbreak", "control character"},
		{"del\x7f", "control character"},
		{"c1\u0085", "control character"},
		{"bad\xffutf8", "not valid UTF-8"},
		{strings.Repeat("a", 128), ""},
		{"7f9c-ünïcode-✓", ""},
	} {
		_, err := h.c.Send(context.Background(), p.GID, bridge.SendRequest{Target: "w", Message: "m " + tc.id, RequestID: tc.id}, nil)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("id %q refused: %v", tc.id, err)
		case tc.want != "" && (!isUserError(err) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("id %q: %v, want a user error with %q", tc.id, err, tc.want)
		}
	}
}
