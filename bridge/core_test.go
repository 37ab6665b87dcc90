package bridge_test

// Tests of the bridge core (core.go, entstate.go and the tool calls) on the real embedded
// transport: every tool status of SPEC §2/§4, the user errors, and the races
// where a message arrives while a waiter is being set up, resolved or
// cancelled. Clocks are injected so expiry and the re-attach grace are
// driven by the test, never by sleeping.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/embedded"
	"github.com/herdbridge/herdbridge/bridge/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// bound is how long any test waits for something that should happen at
// once; only a broken core ever waits this long.
const bound = 5 * time.Second

// clock is a real clock that a test can move forward.
type clock struct{ off atomic.Int64 }

func (c *clock) Now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *clock) Advance(d time.Duration) { c.off.Add(int64(d)) }

// harness is one gateway: a core on an embedded transport and a store in a
// temp dir. clk drives the core, tclk the transport.
type harness struct {
	t    *testing.T
	cfg  bridge.Config
	tr   *embedded.Transport
	st   *store.Store
	c    *bridge.Core
	clk  *clock
	tclk *clock
}

func newHarness(t *testing.T, mod func(*bridge.Config)) *harness {
	t.Helper()
	dir := t.TempDir()
	return dirsHarness(t, dir, dir, mod)
}

// dirsHarness is newHarness with the state file in storeDir and the
// transport's in transportDir.
func dirsHarness(t *testing.T, storeDir, transportDir string, mod func(*bridge.Config)) *harness {
	t.Helper()
	h := &harness{t: t, clk: &clock{}, tclk: &clock{}}
	tr, err := embedded.Open(filepath.Join(transportDir, "t.db"), embedded.Options{NoSync: true, Now: h.tclk.Now})
	if err != nil {
		t.Fatalf("embedded.Open: %v", err)
	}
	st, err := store.Open(filepath.Join(storeDir, "s.db"), 0)
	if err != nil {
		_ = tr.Close()
		t.Fatalf("store.Open: %v", err)
	}
	h.tr, h.st = tr, st
	h.cfg = bridge.Config{
		Host: "h1", Transport: tr, Store: st, Now: h.clk.Now,
		MaxWait: 3 * time.Second, SweepEvery: 50 * time.Millisecond, ReceiptWait: 2 * time.Second,
		NudgeEvery: 50 * time.Millisecond, ProgressEvery: 50 * time.Millisecond,
	}
	if mod != nil {
		mod(&h.cfg)
	}
	t.Cleanup(func() {
		if h.c != nil {
			_ = h.c.Close()
		}
		_ = h.st.Close()
		_ = tr.Close()
	})
	h.start()
	return h
}

func (h *harness) start() {
	h.t.Helper()
	c, err := bridge.New(h.cfg)
	if err != nil {
		h.t.Fatalf("bridge.New: %v", err)
	}
	h.c = c
	if err := c.Start(context.Background()); err != nil {
		h.t.Fatalf("Start: %v", err)
	}
}

// restart stops the core and starts a new one on the same store and
// transport: a gateway bounce.
func (h *harness) restart() {
	h.t.Helper()
	if err := h.c.Close(); err != nil {
		h.t.Fatalf("Close: %v", err)
	}
	h.start()
}

func (h *harness) reg(name string, role bridge.Role, groups ...string) bridge.Entity {
	h.t.Helper()
	e, tok, err := h.c.Register(context.Background(), bridge.RegisterRequest{Name: name, Role: role, Groups: groups})
	if err != nil {
		h.t.Fatalf("Register %s: %v", name, err)
	}
	if tok == "" {
		h.t.Fatalf("Register %s: empty token", name)
	}
	return e
}

func (h *harness) send(from bridge.Entity, req bridge.SendRequest) *bridge.Result {
	h.t.Helper()
	res, err := h.c.Send(context.Background(), from.GID, req, nil)
	if err != nil {
		h.t.Fatalf("Send %s -> %q: %v", from.Name, req.Target, err)
	}
	return res
}

func (h *harness) poll(who bridge.Entity, req bridge.PollRequest) *bridge.Result {
	h.t.Helper()
	res, err := h.c.Poll(context.Background(), who.GID, req, nil)
	if err != nil {
		h.t.Fatalf("Poll %s: %v", who.Name, err)
	}
	return res
}

// answer answers turn as who: bridge_send with a turn_id.
func (h *harness) answer(who bridge.Entity, turn, msg string) *bridge.Result {
	h.t.Helper()
	return h.send(who, bridge.SendRequest{Message: msg, TurnID: turn})
}

func (h *harness) view(name string) (bridge.EntityView, bool) {
	for _, e := range h.c.Roster().Entities {
		if e.Name == name {
			return e, true
		}
	}
	return bridge.EntityView{}, false
}

// waitingOn waits until name has an open waiter (poll, send).
func (h *harness) waitingOn(name string) {
	h.t.Helper()
	eventually(h.t, name+" has an open waiter", func() bool { v, _ := h.view(name); return v.Waiting })
}

// heldFor waits until name holds n messages.
func (h *harness) heldFor(name string, n int) {
	h.t.Helper()
	eventually(h.t, fmt.Sprintf("%s holds %d", name, n), func() bool { v, _ := h.view(name); return v.Held == n })
}

// publishRaw puts env on the transport directly, as another gateway would.
func (h *harness) publishRaw(key string, env *bridge.Envelope) {
	h.t.Helper()
	if err := h.tr.Publish(context.Background(), key, env, true); err != nil {
		h.t.Fatalf("Publish %s: %v", env.Kind, err)
	}
}

func (h *harness) rawEnv(kind bridge.Kind, from, to, body string) *bridge.Envelope {
	now := h.clk.Now()
	return &bridge.Envelope{
		V: bridge.Version, Kind: kind, MsgID: uuid.NewString(), TraceID: uuid.NewString(),
		From: from, To: to, Host: h.cfg.Host, TS: now, ExpiresAt: now.Add(time.Hour), Body: []byte(body),
	}
}

func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting until %s", bound, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// async runs a blocking call and hands back its outcome.
type outcome struct {
	res *bridge.Result
	err error
}

func async(f func() (*bridge.Result, error)) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		r, err := f()
		ch <- outcome{r, err}
	}()
	return ch
}

func await(t *testing.T, what string, ch <-chan outcome) outcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(bound):
		t.Fatalf("%s did not return within %v", what, bound)
		return outcome{}
	}
}

func awaitOK(t *testing.T, what string, ch <-chan outcome) *bridge.Result {
	t.Helper()
	o := await(t, what, ch)
	if o.err != nil {
		t.Fatalf("%s: %v", what, o.err)
	}
	return o.res
}

func wantStatus(t *testing.T, what string, res *bridge.Result, want string) {
	t.Helper()
	if res.Status != want {
		t.Fatalf("%s: status %q (reason %q), want %q", what, res.Status, res.Reason, want)
	}
}

func bodies(res *bridge.Result) []string {
	var out []string
	for _, m := range res.Messages {
		out = append(out, m.Body)
	}
	return out
}

// pair registers a primary p and a worker w.
func pair(h *harness) (p, w bridge.Entity) {
	return h.reg("p", bridge.RolePrimary), h.reg("w", bridge.RoleWorker)
}

// openAsk has w ask p while p long-polls, and returns the ask call and the
// turn p received.
func openAsk(ctx context.Context, t *testing.T, h *harness, p, w bridge.Entity, timeout time.Duration) (<-chan outcome, string) {
	t.Helper()
	pl := async(func() (*bridge.Result, error) {
		return h.c.Poll(context.Background(), p.GID, bridge.PollRequest{Wait: 3 * time.Second}, nil)
	})
	h.waitingOn(p.Name)
	ask := async(func() (*bridge.Result, error) {
		return h.c.Ask(ctx, w.GID, bridge.AskRequest{Question: "which db?", Target: p.GID, Timeout: timeout, Wait: 3 * time.Second}, nil)
	})
	got := awaitOK(t, "poll for the ask", pl)
	wantStatus(t, "poll for the ask", got, bridge.StatusAsked) // README "Semantics": an ASK to an open poll returns asked
	if len(got.Messages) != 1 || got.Messages[0].Kind != bridge.KindAsk || got.TurnID == "" || got.Messages[0].TurnID != got.TurnID {
		t.Fatalf("poll returned %+v, want the one ASK with its turn", got)
	}
	if !strings.Contains(got.Next, got.TurnID) {
		t.Fatalf("poll Next %q does not say how to answer turn %s", got.Next, got.TurnID)
	}
	return ask, got.TurnID
}

// TestStatuses drives every status a core call can return (SPEC §2, §4)
// through a scenario, and checks that the table covers them all. injected,
// submitted and uncertain come from the herdr pane injector, not the core.
func TestStatuses(t *testing.T) {
	type scenario struct {
		name string
		want string
		cfg  func(*bridge.Config)
		run  func(t *testing.T, h *harness) string
	}
	cases := []scenario{
		{name: "REPLY into a primary is confirmed", want: bridge.StatusConfirmed, run: func(t *testing.T, h *harness) string {
			p, w := pair(h)
			res := h.send(w, bridge.SendRequest{Target: "p", Message: "done"})
			if res.MsgID == "" || res.TraceID == "" || res.Target != "p@h1" {
				t.Fatalf("result %+v lacks ids or target", res)
			}
			h.heldFor("p", 1)
			got := h.poll(p, bridge.PollRequest{})
			if got.Messages[0].Kind != bridge.KindReply || got.Messages[0].FromName != "w" || got.Messages[0].MsgID != res.MsgID {
				t.Fatalf("poll got %+v, want w's REPLY %s", got.Messages, res.MsgID)
			}
			return res.Status
		}},
		{name: "SEND into a worker without wait is confirmed", want: bridge.StatusConfirmed, run: func(t *testing.T, h *harness) string {
			p, w := pair(h)
			res := h.send(p, bridge.SendRequest{Target: w.GID, Message: "brief"})
			h.heldFor("w", 1)
			return res.Status
		}},
		{name: "broadcast is confirmed", want: bridge.StatusConfirmed, run: func(t *testing.T, h *harness) string {
			p, _ := pair(h)
			res, err := h.c.Broadcast(context.Background(), p.GID, bridge.BroadcastRequest{Message: "hello all"})
			if err != nil {
				t.Fatal(err)
			}
			if res.Target != bridge.BroadcastAll {
				t.Fatalf("target %q", res.Target)
			}
			return res.Status
		}},
		{name: "open send gets its reply", want: bridge.StatusReplied, run: func(t *testing.T, h *harness) string {
			p, w := pair(h)
			sent := async(func() (*bridge.Result, error) {
				return h.c.Send(context.Background(), p.GID, bridge.SendRequest{Target: "w", Message: "do it", Wait: 3 * time.Second}, nil)
			})
			brief := h.poll(w, bridge.PollRequest{Wait: 3 * time.Second})
			if len(brief.Messages) != 1 || brief.Messages[0].Kind != bridge.KindSend || brief.Messages[0].Body != "do it" {
				t.Fatalf("worker got %+v", brief.Messages)
			}
			rep := h.send(w, bridge.SendRequest{Target: "p", Message: "did it"})
			res := awaitOK(t, "open send", sent)
			if got := bodies(res); !slices.Equal(got, []string{"did it"}) || res.Messages[0].From != w.GID {
				t.Fatalf("send returned %v", got)
			}
			if rep.TraceID != res.TraceID {
				t.Fatalf("reply trace %s, want the brief's %s", rep.TraceID, res.TraceID)
			}
			if got := h.poll(p, bridge.PollRequest{}); got.Status != bridge.StatusEmpty {
				t.Fatalf("the reply was also held: %+v", got)
			}
			return res.Status
		}},
		{name: "open send gets an ASK", want: bridge.StatusAsked, run: func(t *testing.T, h *harness) string {
			res, _, _ := askBackFlow(t, h)
			return res.Status
		}},
		{name: "ask gets its answer", want: bridge.StatusAnswered, run: func(t *testing.T, h *harness) string {
			_, _, ask := askBackFlow(t, h)
			return ask.Status
		}},
		{name: "answer reaches the waiting turn", want: bridge.StatusDelivered, run: func(t *testing.T, h *harness) string {
			_, ans, _ := askBackFlow(t, h)
			return ans.Status
		}},
		{name: "open send runs out of wait", want: bridge.StatusPending, run: func(t *testing.T, h *harness) string {
			p, _ := pair(h)
			res := h.send(p, bridge.SendRequest{Target: "w", Message: "brief", Wait: 100 * time.Millisecond})
			if !strings.Contains(res.Next, "bridge_poll") {
				t.Fatalf("pending send Next %q does not name bridge_poll", res.Next)
			}
			return res.Status
		}},
		{name: "ask runs out of wait and resumes by turn_id", want: bridge.StatusPending, run: func(t *testing.T, h *harness) string {
			p, w := pair(h)
			pl := async(func() (*bridge.Result, error) {
				return h.c.Poll(context.Background(), p.GID, bridge.PollRequest{Wait: 3 * time.Second}, nil)
			})
			h.waitingOn("p")
			res, err := h.c.Ask(context.Background(), w.GID, bridge.AskRequest{Question: "q", Target: "p", Wait: 100 * time.Millisecond}, nil)
			if err != nil {
				t.Fatal(err)
			}
			turn := awaitOK(t, "poll", pl).TurnID
			if res.TurnID != turn || !strings.Contains(res.Next, turn) {
				t.Fatalf("pending ask %+v, want turn %s in Next", res, turn)
			}
			again := async(func() (*bridge.Result, error) {
				return h.c.Ask(context.Background(), w.GID, bridge.AskRequest{TurnID: turn, Wait: 3 * time.Second}, nil)
			})
			wantStatus(t, "answer", h.answer(p, turn, "postgres"), bridge.StatusDelivered)
			resumed := awaitOK(t, "resumed ask", again)
			wantStatus(t, "resumed ask", resumed, bridge.StatusAnswered)
			if !slices.Equal(bodies(resumed), []string{"postgres"}) {
				t.Fatalf("resumed ask got %v", bodies(resumed))
			}
			return res.Status
		}},
		{name: "ask with nobody waiting", want: bridge.StatusNoWaiter, run: func(t *testing.T, h *harness) string {
			_, w := pair(h)
			res, err := h.c.Ask(context.Background(), w.GID, bridge.AskRequest{Question: "q", Target: "p", Wait: 3 * time.Second}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Reason == "" {
				t.Fatal("no_waiter without a reason")
			}
			h.heldFor("p", 1) // the ASK is not held, its MISSED_ASK is (missedask_test.go)
			return res.Status
		}},
		{name: "answer after the ask expired", want: bridge.StatusTooLate, run: func(t *testing.T, h *harness) string {
			p, w := pair(h)
			ask, turn := openAsk(context.Background(), t, h, p, w, time.Hour)
			h.clk.Advance(time.Hour + time.Second)
			wantStatus(t, "ask", awaitOK(t, "ask", ask), bridge.StatusExpired)
			return h.answer(p, turn, "too slow").Status
		}},
		{name: "ANSWER for a turn that is not waiting is refused by the asker's gateway", want: bridge.StatusTooLate, run: func(t *testing.T, h *harness) string {
			p, w := pair(h)
			a := h.rawEnv(bridge.KindAnswer, p.GID, w.GID, "stray")
			a.Corr, a.TurnID = uuid.NewString(), uuid.NewString()
			h.publishRaw(w.GID, a)
			got := h.poll(p, bridge.PollRequest{Wait: 3 * time.Second})
			if len(got.Messages) != 1 || got.Messages[0].Kind != bridge.KindTooLate || got.Messages[0].TurnID != a.TurnID {
				t.Fatalf("answerer got %+v, want TOO_LATE for turn %s", got.Messages, a.TurnID)
			}
			return strings.ToLower(string(got.Messages[0].Kind))
		}},
		{name: "second answer to one turn", want: bridge.StatusAlreadyAnswered, run: func(t *testing.T, h *harness) string {
			p, w := pair(h)
			ask, turn := openAsk(context.Background(), t, h, p, w, 0)
			wantStatus(t, "first answer", h.answer(p, turn, "one"), bridge.StatusDelivered)
			res := h.answer(p, turn, "two")
			got := awaitOK(t, "ask", ask)
			if !slices.Equal(bodies(got), []string{"one"}) {
				t.Fatalf("ask got %v, want only the first answer", bodies(got))
			}
			return res.Status
		}},
		{name: "retried ANSWER with a new msgId never reaches the turn twice", want: bridge.StatusAlreadyAnswered, run: func(t *testing.T, h *harness) string {
			p, w := pair(h)
			ask, turn := openAsk(context.Background(), t, h, p, w, 0)
			first := h.answer(p, turn, "one")
			wantStatus(t, "first answer", first, bridge.StatusDelivered)
			wantStatus(t, "ask", awaitOK(t, "ask", ask), bridge.StatusAnswered)
			retry := h.rawEnv(bridge.KindAnswer, p.GID, w.GID, "one again")
			retry.Corr, retry.TurnID = uuid.NewString(), turn
			h.publishRaw(w.GID, retry)
			got := h.poll(p, bridge.PollRequest{Wait: 3 * time.Second})
			if len(got.Messages) != 1 || got.Messages[0].Kind != bridge.KindTooLate {
				t.Fatalf("answerer got %+v, want TOO_LATE", got.Messages)
			}
			again, err := h.c.Ask(context.Background(), w.GID, bridge.AskRequest{TurnID: turn}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(bodies(again), []string{"one"}) {
				t.Fatalf("turn now shows %v", bodies(again))
			}
			return got.Messages[0].Body
		}},
		{name: "cancelled ask call", want: bridge.StatusAbandoned, run: func(t *testing.T, h *harness) string {
			p, w := pair(h)
			ctx, cancel := context.WithCancel(context.Background())
			ask, turn := openAsk(ctx, t, h, p, w, 0)
			cancel()
			if o := await(t, "ask", ask); !errors.Is(o.err, context.Canceled) {
				t.Fatalf("cancelled ask returned %+v, %v", o.res, o.err)
			}
			return h.answer(p, turn, "anyone?").Status
		}},
		{name: "answerer detached past the re-attach grace", want: bridge.StatusAbandoned, run: func(t *testing.T, h *harness) string {
			p, w := pair(h)
			h.c.Attach(p.GID)
			ask, _ := openAsk(context.Background(), t, h, p, w, 0)
			h.c.Detach(p.GID)
			h.clk.Advance(h.c.Config().ReattachGrace + time.Second)
			return awaitOK(t, "ask", ask).Status
		}},
		{name: "asker detached past the re-attach grace", want: bridge.StatusAbandoned, run: func(t *testing.T, h *harness) string {
			p, w := pair(h)
			h.c.Attach(w.GID)
			ask, turn := openAsk(context.Background(), t, h, p, w, 0)
			h.c.Detach(w.GID)
			h.clk.Advance(h.c.Config().ReattachGrace + time.Second)
			wantStatus(t, "ask", awaitOK(t, "ask", ask), bridge.StatusAbandoned)
			return h.answer(p, turn, "late").Status
		}},
		{name: "asker removed", want: bridge.StatusAbandoned, run: func(t *testing.T, h *harness) string {
			p, w := pair(h)
			ask, turn := openAsk(context.Background(), t, h, p, w, 0)
			if err := h.c.Remove(context.Background(), w.GID); err != nil {
				t.Fatal(err)
			}
			wantStatus(t, "ask of the removed asker", awaitOK(t, "ask", ask), bridge.StatusAbandoned)
			return h.answer(p, turn, "late").Status
		}},
		{name: "answerer removed", want: bridge.StatusAbandoned, run: func(t *testing.T, h *harness) string {
			p, w := pair(h)
			ask, _ := openAsk(context.Background(), t, h, p, w, 0)
			if err := h.c.Remove(context.Background(), p.GID); err != nil {
				t.Fatal(err)
			}
			return awaitOK(t, "ask", ask).Status
		}},
		{name: "ask timeout", want: bridge.StatusExpired, run: func(t *testing.T, h *harness) string {
			p, w := pair(h)
			ask, _ := openAsk(context.Background(), t, h, p, w, time.Minute)
			h.clk.Advance(time.Minute)
			return awaitOK(t, "ask", ask).Status
		}},
		{name: "held SEND expires: its sender gets FAILED held in its inbox", want: bridge.StatusFailed, run: func(t *testing.T, h *harness) string {
			p, _ := pair(h)
			sent := h.send(p, bridge.SendRequest{Target: "w", Message: "brief"})
			h.heldFor("w", 1)
			h.clk.Advance(h.c.Config().MessageTTL + time.Second)
			h.heldFor("w", 0)
			h.heldFor("p", 1)
			got := h.poll(p, bridge.PollRequest{})
			if len(got.Messages) != 1 || got.Messages[0].Kind != bridge.KindFailed || !strings.Contains(got.Messages[0].Body, "expired") || got.Messages[0].TraceID != sent.TraceID {
				t.Fatalf("sender got %+v, want FAILED (expired) on trace %s", got.Messages, sent.TraceID)
			}
			eventually(t, "the expired brief is acked", func() bool { return h.tr.Depth(h.mustResolve("w").GID) == 0 })
			return strings.ToLower(string(got.Messages[0].Kind))
		}},
		{name: "open send whose brief expires unread", want: bridge.StatusFailed, run: func(t *testing.T, h *harness) string {
			p, _ := pair(h)
			sent := async(func() (*bridge.Result, error) {
				return h.c.Send(context.Background(), p.GID, bridge.SendRequest{Target: "w", Message: "brief", Wait: 3 * time.Second}, nil)
			})
			h.heldFor("w", 1)
			h.clk.Advance(h.c.Config().MessageTTL + time.Second)
			res := awaitOK(t, "send", sent)
			// the FAILED notice is in messages, as data; the reason is ours
			if len(res.Messages) != 1 || res.Messages[0].Kind != bridge.KindFailed || !strings.Contains(res.Messages[0].Body, "expired") || !strings.Contains(res.Reason, "FAILED notice in messages") {
				t.Fatalf("failed send reason %q messages %+v", res.Reason, res.Messages)
			}
			return res.Status
		}},
		{name: "SEND whose to differs from the inbox is refused, dead-lettered and counted; its claimed sender is not written to", want: "refused", run: func(t *testing.T, h *harness) string {
			p, w := pair(h)
			x := h.reg("x", bridge.RolePrimary)
			bad := h.rawEnv(bridge.KindSend, p.GID, x.GID, "misrouted") // to does not match w's inbox
			h.publishRaw(w.GID, bad)
			eventually(t, "dead letter logged, not reported", func() bool {
				dl, err := h.c.DeadLetters(10)
				return err == nil && len(dl) == 1 && dl[0].MsgID == bad.MsgID && !dl[0].Reported && dl[0].Reason == bridge.ReasonRejected+": "+bridge.RefuseToMismatch
			})
			if n := h.c.Refused()[bridge.RefuseToMismatch]; n != 1 {
				t.Fatalf("to-mismatch counter %d, want 1", n)
			}
			if got := h.poll(p, bridge.PollRequest{Wait: 200 * time.Millisecond}); len(got.Messages) != 0 {
				t.Fatalf("the named sender got %+v: a forged message must not make the gateway write to it", got.Messages)
			}
			h.heldFor("w", 0)
			return "refused"
		}},
		{name: "SEND expiring in the backlog is dead-lettered and reported FAILED to its sender", want: bridge.StatusFailed,
			cfg: func(c *bridge.Config) { c.Prefetch = 1; c.InboxTTL = time.Minute; c.InboxMaxLength = 1 },
			run: func(t *testing.T, h *harness) string {
				p, w := pair(h)
				h.send(p, bridge.SendRequest{Target: "w", Message: "zero"}) // held in the store: w's cap of 1 is reached
				h.heldFor("w", 1)
				h.send(p, bridge.SendRequest{Target: "w", Message: "one"}) // held unacked: fills w's prefetch window
				h.heldFor("w", 2)
				two := h.send(p, bridge.SendRequest{Target: "w", Message: "two"}) // waits in the queue
				h.tclk.Advance(2 * time.Minute)
				h.poll(w, bridge.PollRequest{}) // opens the window: "two" is past the TTL
				got := h.poll(p, bridge.PollRequest{Wait: 3 * time.Second})
				if gw := bridge.GatewayGID(h.c.Config().Host); len(got.Messages) != 1 || got.Messages[0].Kind != bridge.KindFailed || !strings.Contains(got.Messages[0].Body, bridge.ReasonExpired) || got.Messages[0].From != gw {
					t.Fatalf("sender got %+v, want FAILED (expired) from the gateway %s", got.Messages, gw)
				}
				eventually(t, "dead letter logged", func() bool {
					dl, err := h.c.DeadLetters(10)
					return err == nil && len(dl) == 1 && dl[0].MsgID == two.MsgID && dl[0].Reason == bridge.ReasonExpired && dl[0].Reported
				})
				return strings.ToLower(string(got.Messages[0].Kind))
			}},
		{name: "poll drains in arrival order", want: bridge.StatusDrained, run: func(t *testing.T, h *harness) string {
			p, w := pair(h)
			for _, m := range []string{"a", "b", "c"} {
				h.send(w, bridge.SendRequest{Target: "p", Message: m})
			}
			h.heldFor("p", 3)
			res := h.poll(p, bridge.PollRequest{})
			if !slices.Equal(bodies(res), []string{"a", "b", "c"}) || res.Held != nil {
				t.Fatalf("drained %v, held %+v", bodies(res), res.Held)
			}
			eventually(t, "drained messages acked", func() bool { return h.tr.Depth(p.GID) == 0 })
			wantStatus(t, "second poll", h.poll(p, bridge.PollRequest{}), bridge.StatusEmpty)
			return res.Status
		}},
		{name: "poll with target and max leaves the rest held", want: bridge.StatusDrained, run: func(t *testing.T, h *harness) string {
			p, w := pair(h)
			w2 := h.reg("w2", bridge.RoleWorker)
			h.send(w, bridge.SendRequest{Target: "p", Message: "w-1"})
			h.send(w2, bridge.SendRequest{Target: "p", Message: "w2-1"})
			h.send(w2, bridge.SendRequest{Target: "p", Message: "w2-2"})
			h.heldFor("p", 3)
			res := h.poll(p, bridge.PollRequest{Target: "w2", Max: 1})
			if !slices.Equal(bodies(res), []string{"w2-1"}) || res.Held == nil || res.Held.Total != 2 {
				t.Fatalf("drained %v, held %+v", bodies(res), res.Held)
			}
			res = h.poll(p, bridge.PollRequest{Target: "w2"})
			if !slices.Equal(bodies(res), []string{"w2-2"}) || res.Held == nil || res.Held.Total != 1 || res.Held.From[0].FromName != "w" {
				t.Fatalf("drained %v, held %+v", bodies(res), res.Held)
			}
			if got := h.poll(p, bridge.PollRequest{}); !slices.Equal(bodies(got), []string{"w-1"}) {
				t.Fatalf("drained %v", bodies(got))
			}
			return res.Status
		}},
		{name: "peek reads without consuming", want: bridge.StatusPeeked, run: func(t *testing.T, h *harness) string {
			p, w := pair(h)
			h.send(w, bridge.SendRequest{Target: "p", Message: "a"})
			h.send(w, bridge.SendRequest{Target: "p", Message: "b"})
			h.heldFor("p", 2)
			res := h.poll(p, bridge.PollRequest{Peek: true})
			if !slices.Equal(bodies(res), []string{"a", "b"}) || res.Held == nil || res.Held.Total != 2 {
				t.Fatalf("peeked %v, held %+v", bodies(res), res.Held)
			}
			if got := h.poll(p, bridge.PollRequest{Peek: true, Max: 1}); !slices.Equal(bodies(got), []string{"a"}) {
				t.Fatalf("peek max 1: %v", bodies(got))
			}
			if got := h.poll(p, bridge.PollRequest{}); !slices.Equal(bodies(got), []string{"a", "b"}) {
				t.Fatalf("drained after peek: %v", bodies(got))
			}
			return res.Status
		}},
		{name: "poll finds nothing", want: bridge.StatusEmpty, run: func(t *testing.T, h *harness) string {
			p, w := pair(h)
			wantStatus(t, "peek", h.poll(p, bridge.PollRequest{Peek: true}), bridge.StatusEmpty)
			h.send(w, bridge.SendRequest{Target: "p", Message: "not for the filter"})
			h.heldFor("p", 1)
			x := h.reg("x", bridge.RoleWorker)
			res := h.poll(p, bridge.PollRequest{Target: x.Name, Wait: 50 * time.Millisecond})
			if res.Next == "" || res.Held == nil || res.Held.Total != 1 {
				t.Fatalf("empty long-poll %+v: wants Next and the held summary", res)
			}
			return res.Status
		}},
	}
	covered := map[string]bool{}
	for _, tc := range cases {
		covered[tc.want] = true
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, tc.cfg)
			if got := tc.run(t, h); got != tc.want {
				t.Fatalf("status %q, want %q", got, tc.want)
			}
		})
	}
	for _, s := range []string{
		bridge.StatusConfirmed, bridge.StatusReplied, bridge.StatusAsked, bridge.StatusPending,
		bridge.StatusAnswered, bridge.StatusDelivered, bridge.StatusNoWaiter, bridge.StatusTooLate,
		bridge.StatusAlreadyAnswered, bridge.StatusAbandoned, bridge.StatusExpired, bridge.StatusFailed,
		bridge.StatusDrained, bridge.StatusPeeked, bridge.StatusEmpty,
	} {
		if !covered[s] {
			t.Errorf("no scenario for status %q", s)
		}
	}
}

func (h *harness) mustResolve(target string) bridge.Entity {
	h.t.Helper()
	e, err := h.c.Resolve(target)
	if err != nil {
		h.t.Fatalf("Resolve %s: %v", target, err)
	}
	return e
}

// askBackFlow: p briefs w with an open send; w asks back (default target:
// the sender of its brief); the open send returns the ASK; p answers; w's
// ask returns the answer.
func askBackFlow(t *testing.T, h *harness) (sendRes, answerRes, askRes *bridge.Result) {
	t.Helper()
	p, w := pair(h)
	sent := async(func() (*bridge.Result, error) {
		return h.c.Send(context.Background(), p.GID, bridge.SendRequest{Target: "w", Message: "build it", Wait: 3 * time.Second}, nil)
	})
	brief := h.poll(w, bridge.PollRequest{Wait: 3 * time.Second})
	if len(brief.Messages) != 1 {
		t.Fatalf("worker got %+v", brief.Messages)
	}
	ask := async(func() (*bridge.Result, error) {
		return h.c.Ask(context.Background(), w.GID, bridge.AskRequest{Question: "which db?", Wait: 3 * time.Second}, nil)
	})
	sendRes = awaitOK(t, "open send", sent)
	if sendRes.Status != bridge.StatusAsked || sendRes.TurnID == "" || !strings.Contains(sendRes.Next, sendRes.TurnID) {
		t.Fatalf("open send returned %+v, want asked with a turn", sendRes)
	}
	if len(sendRes.Messages) != 1 || sendRes.Messages[0].Body != "which db?" || sendRes.Messages[0].TraceID != sendRes.TraceID {
		t.Fatalf("asked with %+v, want the question on the brief's trace", sendRes.Messages)
	}
	answerRes = h.send(p, bridge.SendRequest{Target: "w", Message: "postgres", TurnID: sendRes.TurnID})
	askRes = awaitOK(t, "ask", ask)
	if askRes.TurnID != sendRes.TurnID || !slices.Equal(bodies(askRes), []string{"postgres"}) {
		t.Fatalf("ask returned %+v", askRes)
	}
	return sendRes, answerRes, askRes
}

func TestConcurrentAnswersOneWins(t *testing.T) {
	h := newHarness(t, nil)
	p, w := pair(h)
	for i := range 20 {
		ask, turn := openAsk(context.Background(), t, h, p, w, 0)
		var delivered, already atomic.Int32
		var wg sync.WaitGroup
		for j := range 4 {
			wg.Go(func() {
				res := h.answer(p, turn, fmt.Sprintf("answer %d", j))
				switch res.Status {
				case bridge.StatusDelivered:
					delivered.Add(1)
				case bridge.StatusAlreadyAnswered:
					already.Add(1)
				default:
					t.Errorf("iteration %d: answer %d: %+v", i, j, res)
				}
			})
		}
		wg.Wait()
		if delivered.Load() != 1 || already.Load() != 3 {
			t.Fatalf("iteration %d: %d delivered, %d already answered", i, delivered.Load(), already.Load())
		}
		if got := awaitOK(t, "ask", ask); len(got.Messages) != 1 {
			t.Fatalf("ask got %v", bodies(got))
		}
	}
}

func TestAnswerFromAnotherEntityRefused(t *testing.T) {
	h := newHarness(t, nil)
	p, w := pair(h)
	x := h.reg("x", bridge.RolePrimary)
	ask, turn := openAsk(context.Background(), t, h, p, w, 0)

	// x did not receive the ASK: the core refuses to answer for it ...
	if _, err := h.c.Send(context.Background(), x.GID, bridge.SendRequest{Target: "w", Message: "me", TurnID: turn}, nil); !isUserError(err) {
		t.Fatalf("answer by x: %v, want a user error", err)
	}
	// ... and the asker's gateway refuses a forged one
	forged := h.rawEnv(bridge.KindAnswer, x.GID, w.GID, "me")
	forged.Corr, forged.TurnID = uuid.NewString(), turn
	h.publishRaw(w.GID, forged)
	got := h.poll(x, bridge.PollRequest{Wait: 3 * time.Second})
	if len(got.Messages) != 1 || got.Messages[0].Kind != bridge.KindTooLate || !strings.Contains(got.Messages[0].Body, "refused") {
		t.Fatalf("x got %+v, want TOO_LATE refused", got.Messages)
	}
	// the asked entity naming the wrong target is told so
	if _, err := h.c.Send(context.Background(), p.GID, bridge.SendRequest{Target: "x", Message: "m", TurnID: turn}, nil); !isUserError(err) {
		t.Fatalf("answer naming x: %v, want a user error", err)
	}
	wantStatus(t, "answer", h.answer(p, turn, "real"), bridge.StatusDelivered)
	if res := awaitOK(t, "ask", ask); !slices.Equal(bodies(res), []string{"real"}) {
		t.Fatalf("ask got %v", bodies(res))
	}
}

func TestReattachWithinGraceKeepsTurns(t *testing.T) {
	h := newHarness(t, nil)
	p, w := pair(h)
	h.c.Attach(p.GID)
	ask, turn := openAsk(context.Background(), t, h, p, w, 0)
	h.c.Detach(p.GID)
	h.clk.Advance(h.c.Config().ReattachGrace / 2)
	h.c.Attach(p.GID) // the MCP process came back
	h.clk.Advance(h.c.Config().ReattachGrace)
	wantStatus(t, "answer after re-attach", h.answer(p, turn, "still here"), bridge.StatusDelivered)
	wantStatus(t, "ask", awaitOK(t, "ask", ask), bridge.StatusAnswered)
}

func isUserError(err error) bool {
	var ue *bridge.UserError
	return errors.As(err, &ue)
}

func TestUserErrors(t *testing.T) {
	h := newHarness(t, func(c *bridge.Config) { c.MaxMessageBytes = 64 })
	p, w := pair(h)
	ctx := context.Background()
	cases := []struct {
		name string
		call func() error
		want string
	}{
		{"register bad name", func() error {
			_, _, err := h.c.Register(ctx, bridge.RegisterRequest{Name: "a@b", Role: bridge.RolePrimary})
			return err
		}, "not valid"},
		{"register bad role", func() error {
			_, _, err := h.c.Register(ctx, bridge.RegisterRequest{Name: "a", Role: "boss"})
			return err
		}, "role"},
		{"register bad group", func() error {
			_, _, err := h.c.Register(ctx, bridge.RegisterRequest{Name: "a", Role: bridge.RoleWorker, Groups: []string{"all"}})
			return err
		}, "group"},
		{"send empty", func() error {
			_, err := h.c.Send(ctx, p.GID, bridge.SendRequest{Target: "w", Message: "  "}, nil)
			return err
		}, "empty"},
		{"send too big", func() error {
			_, err := h.c.Send(ctx, p.GID, bridge.SendRequest{Target: "w", Message: strings.Repeat("x", 65)}, nil)
			return err
		}, "limit"},
		{"send to self", func() error {
			_, err := h.c.Send(ctx, p.GID, bridge.SendRequest{Target: "p", Message: "m"}, nil)
			return err
		}, "is you"},
		{"send to unknown", func() error {
			_, err := h.c.Send(ctx, p.GID, bridge.SendRequest{Target: "nobody", Message: "m"}, nil)
			return err
		}, "nobody"},
		{"send from unregistered", func() error {
			_, err := h.c.Send(ctx, uuid.NewString(), bridge.SendRequest{Target: "w", Message: "m"}, nil)
			return err
		}, "register"},
		{"answer unknown turn", func() error {
			_, err := h.c.Send(ctx, p.GID, bridge.SendRequest{Message: "m", TurnID: uuid.NewString()}, nil)
			return err
		}, "turn_id"},
		{"ask without brief or target", func() error { _, err := h.c.Ask(ctx, w.GID, bridge.AskRequest{Question: "q"}, nil); return err }, "target"},
		{"ask self", func() error {
			_, err := h.c.Ask(ctx, w.GID, bridge.AskRequest{Question: "q", Target: "w"}, nil)
			return err
		}, "is you"},
		{"ask empty", func() error {
			_, err := h.c.Ask(ctx, w.GID, bridge.AskRequest{Question: "", Target: "p"}, nil)
			return err
		}, "empty"},
		{"resume unknown ask", func() error {
			_, err := h.c.Ask(ctx, w.GID, bridge.AskRequest{TurnID: uuid.NewString()}, nil)
			return err
		}, "turn_id"},
		{"poll unknown target", func() error { _, err := h.c.Poll(ctx, p.GID, bridge.PollRequest{Target: "ww"}, nil); return err }, "did you mean w"},
		{"broadcast bad group", func() error {
			_, err := h.c.Broadcast(ctx, p.GID, bridge.BroadcastRequest{Message: "m", Group: "Bad Group"})
			return err
		}, "group"},
		{"remove unknown", func() error { return h.c.Remove(ctx, uuid.NewString()) }, "no entity"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !isUserError(err) {
				t.Fatalf("got %v (%T), want a *bridge.UserError", err, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

func TestInboxFullRefusedSynchronously(t *testing.T) {
	h := newHarness(t, func(c *bridge.Config) { c.Prefetch = 1; c.InboxMaxLength = 1 })
	p, _ := pair(h)
	h.send(p, bridge.SendRequest{Target: "w", Message: "one"}) // held, moved to the store: the gateway's cap is reached
	h.heldFor("w", 1)
	h.send(p, bridge.SendRequest{Target: "w", Message: "two"}) // held, left unacked in the inbox: the prefetch window is full
	h.heldFor("w", 2)
	h.send(p, bridge.SendRequest{Target: "w", Message: "three"}) // ready: the inbox is at its cap
	_, err := h.c.Send(context.Background(), p.GID, bridge.SendRequest{Target: "w", Message: "four"}, nil)
	if !isUserError(err) || !strings.Contains(err.Error(), "full") {
		t.Fatalf("send into a full inbox: %v, want a user error saying it is full", err)
	}
	eventually(t, "overflow logged, not reported again", func() bool {
		dl, err := h.c.DeadLetters(10)
		return err == nil && len(dl) == 1 && dl[0].Reason == bridge.ReasonMaxLen && !dl[0].Reported
	})
	if got := h.poll(p, bridge.PollRequest{}); got.Status != bridge.StatusEmpty {
		t.Fatalf("an overflow refused synchronously was also reported: %+v", got.Messages)
	}
}

func TestResolve(t *testing.T) {
	h := newHarness(t, nil)
	alpha := h.reg("alpha", bridge.RolePrimary)
	h.reg("alpine", bridge.RoleWorker)
	h.reg("builder-1", bridge.RoleWorker)
	ok := []struct{ target, want string }{
		{"alpha", "alpha"},
		{"alpha@h1", "alpha"},
		{alpha.GID, "alpha"},
		{"  builder-1 ", "builder-1"},
	}
	for _, tc := range ok {
		e, err := h.c.Resolve(tc.target)
		if err != nil || e.Name != tc.want {
			t.Errorf("Resolve(%q) = %s, %v; want %s", tc.target, e.Name, err, tc.want)
		}
	}
	bad := []struct {
		target string
		want   []string // the error names these
		not    []string
	}{
		{"alpah", []string{`"alpah"`, "did you mean", "alpha"}, []string{"builder-1"}},
		{"alp", []string{"alpha", "alpine"}, nil},
		{"builder", []string{"builder-1"}, []string{"alpha"}},
		{"zzzzzz", []string{`"zzzzzz"`, "bridge_roster"}, []string{"did you mean"}},
		{"alpha@h2", []string{"h2", "h1"}, nil},
		{"", []string{"empty"}, nil},
	}
	for _, tc := range bad {
		_, err := h.c.Resolve(tc.target)
		if !isUserError(err) {
			t.Errorf("Resolve(%q): %v, want a user error", tc.target, err)
			continue
		}
		for _, s := range tc.want {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("Resolve(%q): %q does not name %q", tc.target, err, s)
			}
		}
		for _, s := range tc.not {
			if strings.Contains(err.Error(), s) {
				t.Errorf("Resolve(%q): %q names %q", tc.target, err, s)
			}
		}
	}
}

type nudge struct {
	e bridge.Entity
	s bridge.HeldSummary
}

type chanNudger struct{ ch chan nudge }

func (n *chanNudger) Nudge(e bridge.Entity, s bridge.HeldSummary) {
	select {
	case n.ch <- nudge{e, s}:
	default:
	}
}

func TestNudgerToldAboutHeldMessages(t *testing.T) {
	n := &chanNudger{ch: make(chan nudge, 16)}
	h := newHarness(t, func(c *bridge.Config) { c.Nudger = n })
	p, w := pair(h)
	next := func() nudge {
		t.Helper()
		select {
		case x := <-n.ch:
			return x
		case <-time.After(bound):
			t.Fatal("no nudge")
			return nudge{}
		}
	}
	h.send(w, bridge.SendRequest{Target: "p", Message: "done"})
	got := next()
	if got.e.GID != p.GID || got.s.Total != 1 || len(got.s.From) != 1 || got.s.From[0].FromName != "w" || got.s.From[0].Count != 1 {
		t.Fatalf("nudge %+v, want p told of 1 held from w", got)
	}
	h.poll(p, bridge.PollRequest{})
	h.send(w, bridge.SendRequest{Target: "p", Message: "more"})
	if got := next(); got.e.GID != p.GID || got.s.Total != 1 {
		t.Fatalf("second nudge %+v", got)
	}
}

func TestOpenSendNotResolvedByAnotherWorker(t *testing.T) {
	h := newHarness(t, nil)
	p, w1 := pair(h)
	w2 := h.reg("w2", bridge.RoleWorker)
	var told atomic.Bool
	prog := func(_, _ time.Duration, msg string) {
		if strings.Contains(msg, "1 other message(s) held") {
			told.Store(true)
		}
	}
	sent := async(func() (*bridge.Result, error) {
		return h.c.Send(context.Background(), p.GID, bridge.SendRequest{Target: "w", Message: "brief", Wait: 3 * time.Second}, prog)
	})
	h.waitingOn("p")
	h.send(w2, bridge.SendRequest{Target: "p", Message: "from w2"})
	h.heldFor("p", 1)
	eventually(t, "the open send is told of the held message", told.Load)
	h.send(w1, bridge.SendRequest{Target: "p", Message: "from w"})
	res := awaitOK(t, "open send", sent)
	wantStatus(t, "open send", res, bridge.StatusReplied)
	if !slices.Equal(bodies(res), []string{"from w"}) {
		t.Fatalf("open send returned %v, want only w's reply", bodies(res))
	}
	if res.Held == nil || res.Held.Total != 1 || res.Held.From[0].From != w2.GID || res.Held.From[0].FromName != "w2" {
		t.Fatalf("Held = %+v, want w2's message", res.Held)
	}
	if got := h.poll(p, bridge.PollRequest{}); !slices.Equal(bodies(got), []string{"from w2"}) {
		t.Fatalf("poll %v", bodies(got))
	}
}

func TestReregisterKeepsGIDAndHeld(t *testing.T) {
	h := newHarness(t, nil)
	p, w := pair(h)
	h.send(w, bridge.SendRequest{Target: "p", Message: "one"})
	h.heldFor("p", 1)

	again, tok, err := h.c.Register(context.Background(), bridge.RegisterRequest{Name: "p", Role: bridge.RolePrimary, Groups: []string{"leads"}})
	if err != nil {
		t.Fatal(err)
	}
	if again.GID != p.GID || !slices.Equal(again.Groups, []string{"leads"}) {
		t.Fatalf("re-register gave %+v, want gid %s with the new groups", again, p.GID)
	}
	if e, ok := h.c.Authenticate(tok); !ok || e.GID != p.GID {
		t.Fatalf("new token authenticates as %+v, %v", e, ok)
	}
	h.heldFor("p", 1)

	// a gateway bounce: held messages are still unacked in the transport
	h.send(w, bridge.SendRequest{Target: "p", Message: "two"})
	h.heldFor("p", 2)
	h.restart()
	after := h.reg("p", bridge.RolePrimary)
	if after.GID != p.GID {
		t.Fatalf("gid after restart %s, want %s", after.GID, p.GID)
	}
	h.heldFor("p", 2)
	if got := h.poll(p, bridge.PollRequest{}); !slices.Equal(bodies(got), []string{"one", "two"}) {
		t.Fatalf("after restart drained %v", bodies(got))
	}
	eventually(t, "drained after restart acked", func() bool { return h.tr.Depth(p.GID) == 0 })
}

func TestSeenSetDedup(t *testing.T) {
	h := newHarness(t, nil)
	p, w := pair(h)
	env := h.rawEnv(bridge.KindReply, w.GID, p.GID, "once")
	h.publishRaw(p.GID, env)
	h.publishRaw(p.GID, env) // a retried publish: same msgId
	h.heldFor("p", 1)
	got := h.poll(p, bridge.PollRequest{})
	if !slices.Equal(bodies(got), []string{"once"}) {
		t.Fatalf("drained %v", bodies(got))
	}
	// both copies settled: nothing left to come back after a restart
	eventually(t, "both copies acked", func() bool { return h.tr.Depth(p.GID) == 0 })
	h.publishRaw(p.GID, env) // after the drain: the seen-set hides it
	eventually(t, "late copy acked", func() bool { return h.tr.Depth(p.GID) == 0 })
	h.restart()
	h.publishRaw(p.GID, h.rawEnv(bridge.KindReply, w.GID, p.GID, "next"))
	if got := h.poll(p, bridge.PollRequest{Wait: 3 * time.Second}); !slices.Equal(bodies(got), []string{"next"}) {
		t.Fatalf("after restart drained %v, want only the new message", bodies(got))
	}
}

func TestBroadcast(t *testing.T) {
	h := newHarness(t, nil)
	a := h.reg("a", bridge.RolePrimary, "team")
	b := h.reg("b", bridge.RoleWorker, "team")
	c := h.reg("c", bridge.RolePrimary)

	res, err := h.c.Broadcast(context.Background(), a.GID, bridge.BroadcastRequest{Message: "team only", Group: "team"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Target != "broadcast.team" {
		t.Fatalf("target %q", res.Target)
	}
	got := h.poll(b, bridge.PollRequest{Wait: 3 * time.Second})
	if len(got.Messages) != 1 || got.Messages[0].Kind != bridge.KindBroadcast || got.Messages[0].Body != "team only" || got.Messages[0].To != "broadcast.team" {
		t.Fatalf("member got %+v", got.Messages)
	}
	if n := h.tr.Depth(c.GID); n != 0 {
		t.Fatalf("non-member's inbox holds %d", n)
	}
	eventually(t, "sender's own copy settled", func() bool { return h.tr.Depth(a.GID) == 0 })
	for _, e := range []bridge.Entity{a, c} {
		if got := h.poll(e, bridge.PollRequest{}); got.Status != bridge.StatusEmpty {
			t.Fatalf("%s got %+v", e.Name, got.Messages)
		}
	}

	if _, err := h.c.Broadcast(context.Background(), a.GID, bridge.BroadcastRequest{Message: "everyone"}); err != nil {
		t.Fatal(err)
	}
	for _, e := range []bridge.Entity{b, c} {
		got := h.poll(e, bridge.PollRequest{Wait: 3 * time.Second})
		if !slices.Equal(bodies(got), []string{"everyone"}) || got.Messages[0].From != a.GID {
			t.Fatalf("%s got %+v", e.Name, got.Messages)
		}
	}
	eventually(t, "sender's own copy settled", func() bool { return h.tr.Depth(a.GID) == 0 })
	if got := h.poll(a, bridge.PollRequest{}); got.Status != bridge.StatusEmpty {
		t.Fatalf("sender got its own broadcast: %+v", got.Messages)
	}
}

// An open poll or send must return when its entity is removed or the core
// closes, not hang on a waiter that was dropped without a message.
func TestOpenCallSurvivesRemoveAndClose(t *testing.T) {
	for _, call := range []string{"poll", "send"} {
		for _, how := range []string{"remove", "close"} {
			t.Run(call+"/"+how, func(t *testing.T) {
				t.Parallel()
				h := newHarness(t, nil)
				p, _ := pair(h)
				open := async(func() (*bridge.Result, error) {
					if call == "poll" {
						return h.c.Poll(context.Background(), p.GID, bridge.PollRequest{Wait: 200 * time.Millisecond}, nil)
					}
					return h.c.Send(context.Background(), p.GID, bridge.SendRequest{Target: "w", Message: "b", Wait: 200 * time.Millisecond}, nil)
				})
				h.waitingOn("p")
				if how == "remove" {
					if err := h.c.Remove(context.Background(), p.GID); err != nil {
						t.Fatal(err)
					}
				} else if err := h.c.Close(); err != nil {
					t.Fatal(err)
				}
				if o := await(t, call, open); o.err != nil || (o.res.Status != bridge.StatusEmpty && o.res.Status != bridge.StatusPending) {
					t.Fatalf("%s returned %+v, %v", call, o.res, o.err)
				}
			})
		}
	}
}

// parallelRace runs iterations of one race on several independent (p, w)
// pairs at once: more interleavings per second, and the store's write
// batches fill up.
func parallelRace(t *testing.T, h *harness, total int, body func(t *testing.T, i int, p, w bridge.Entity)) {
	t.Helper()
	const lanes = 8
	var wg sync.WaitGroup
	for l := range lanes {
		p := h.reg(fmt.Sprintf("p%d", l), bridge.RolePrimary)
		w := h.reg(fmt.Sprintf("w%d", l), bridge.RoleWorker)
		wg.Go(func() {
			for i := l; i < total; i += lanes {
				if t.Failed() {
					return
				}
				body(t, i, p, w)
			}
		})
	}
	wg.Wait()
}

// jitter yields a varying number of times, to move one side of a race.
func jitter(i int) {
	for range i % 7 {
		runtime.Gosched()
	}
}

// An ASK arriving while the open send is being set up is returned by the
// send as "asked" or answered NO_WAITER — never lost, never both.
func TestRaceAskDuringSendSetup(t *testing.T) {
	h := newHarness(t, nil)
	var asked, noWaiter atomic.Int32
	parallelRace(t, h, 200, func(t *testing.T, i int, p, w bridge.Entity) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		sent := async(func() (*bridge.Result, error) {
			return h.c.Send(ctx, p.GID, bridge.SendRequest{Target: w.GID, Message: "brief", Wait: 3 * time.Second}, nil)
		})
		jitter(i)
		ask := async(func() (*bridge.Result, error) {
			return h.c.Ask(context.Background(), w.GID, bridge.AskRequest{Question: "q", Target: p.GID, Wait: 3 * time.Second}, nil)
		})
		select {
		case o := <-sent:
			if o.err != nil || o.res.Status != bridge.StatusAsked {
				t.Errorf("iteration %d: send returned %+v, %v before the ask did", i, o.res, o.err)
				return
			}
			ans := h.answer(p, o.res.TurnID, "a")
			a := awaitOK(t, "ask", ask)
			if ans.Status != bridge.StatusDelivered || a.Status != bridge.StatusAnswered {
				t.Errorf("iteration %d: asked, then answer %q and ask %q", i, ans.Status, a.Status)
			}
			asked.Add(1)
		case o := <-ask:
			if o.err != nil || o.res.Status != bridge.StatusNoWaiter {
				t.Errorf("iteration %d: ask returned %+v, %v before the send did", i, o.res, o.err)
				return
			}
			cancel()
			if s := await(t, "send", sent); !errors.Is(s.err, context.Canceled) {
				t.Errorf("iteration %d: ask got no_waiter, and the send returned %+v, %v", i, s.res, s.err)
			}
			noWaiter.Add(1)
		case <-time.After(bound):
			t.Errorf("iteration %d: neither the send nor the ask returned: the ASK was lost", i)
			cancel()
			await(t, "send", sent)
			await(t, "ask", ask)
		}
	})
	t.Logf("asked %d, no_waiter %d", asked.Load(), noWaiter.Load())
}

// An ASK arriving as the open send's wait runs out is returned as "asked"
// or answered NO_WAITER; a send that returns pending must not have taken it.
func TestRaceAskAtSendTimeout(t *testing.T) {
	h := newHarness(t, nil)
	var asked, noWaiter atomic.Int32
	parallelRace(t, h, 200, func(t *testing.T, i int, p, w bridge.Entity) {
		sent := async(func() (*bridge.Result, error) {
			return h.c.Send(context.Background(), p.GID, bridge.SendRequest{Target: w.GID, Message: "brief", Wait: 5 * time.Millisecond}, nil)
		})
		time.Sleep(time.Duration(i%8) * time.Millisecond) // spread the arrival around the wait cap
		ask := async(func() (*bridge.Result, error) {
			return h.c.Ask(context.Background(), w.GID, bridge.AskRequest{Question: "q", Target: p.GID, Wait: 3 * time.Second}, nil)
		})
		s := awaitOK(t, "send", sent)
		switch s.Status {
		case bridge.StatusAsked:
			h.answer(p, s.TurnID, "a")
			wantStatus(t, "ask", awaitOK(t, "ask", ask), bridge.StatusAnswered)
			asked.Add(1)
		case bridge.StatusPending:
			if a := awaitOK(t, "ask", ask); a.Status != bridge.StatusNoWaiter {
				t.Errorf("iteration %d: send returned pending and the ask %q: the ASK was taken and lost", i, a.Status)
			}
			noWaiter.Add(1)
		default:
			t.Errorf("iteration %d: send %+v", i, s)
		}
	})
	t.Logf("asked %d, no_waiter %d", asked.Load(), noWaiter.Load())
}

// A reply arriving during a poll is delivered exactly once across the poll
// and a follow-up poll.
func TestRaceReplyDuringPoll(t *testing.T) {
	h := newHarness(t, nil)
	parallelRace(t, h, 200, func(t *testing.T, i int, p, w bridge.Entity) {
		body := fmt.Sprintf("reply %d", i)
		pl := async(func() (*bridge.Result, error) {
			return h.c.Poll(context.Background(), p.GID, bridge.PollRequest{Wait: 3 * time.Second}, nil)
		})
		jitter(i)
		h.send(w, bridge.SendRequest{Target: p.GID, Message: body})
		first := awaitOK(t, "poll", pl)
		second := h.poll(p, bridge.PollRequest{})
		got := append(bodies(first), bodies(second)...)
		if !slices.Equal(got, []string{body}) {
			t.Errorf("iteration %d: poll %v then %v, want %q exactly once", i, bodies(first), bodies(second), body)
		}
	})
}

// A cancellation exactly at delivery: the reply is either returned by the
// cancelled poll or still held for the next — never lost, never twice.
func TestRaceCancelAtDelivery(t *testing.T) {
	h := newHarness(t, nil)
	var returned, kept atomic.Int32
	parallelRace(t, h, 200, func(t *testing.T, i int, p, w bridge.Entity) {
		body := fmt.Sprintf("reply %d", i)
		ctx, cancel := context.WithCancel(context.Background())
		pl := async(func() (*bridge.Result, error) {
			return h.c.Poll(ctx, p.GID, bridge.PollRequest{Wait: 3 * time.Second}, nil)
		})
		h.waitingOn(p.Name)
		var wg sync.WaitGroup
		wg.Go(func() {
			jitter(i)
			cancel()
		})
		h.send(w, bridge.SendRequest{Target: p.GID, Message: body})
		wg.Wait()
		o := await(t, "poll", pl)
		var got []string
		switch {
		case o.err == nil:
			got = bodies(o.res)
			returned.Add(1)
		case errors.Is(o.err, context.Canceled):
			kept.Add(1)
		default:
			t.Errorf("iteration %d: poll: %v", i, o.err)
			return
		}
		if len(got) == 0 { // kept: the next poll gets it
			got = bodies(h.poll(p, bridge.PollRequest{Wait: 3 * time.Second}))
		}
		// and nothing is left over to be delivered twice
		got = append(got, bodies(h.poll(p, bridge.PollRequest{}))...)
		if !slices.Equal(got, []string{body}) {
			t.Errorf("iteration %d: got %v across the cancelled poll and the next, want %q once", i, got, body)
		}
	})
	t.Logf("returned by the cancelled poll %d, kept for the next %d", returned.Load(), kept.Load())
}
