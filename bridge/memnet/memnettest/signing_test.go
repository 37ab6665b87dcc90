package memnettest_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/memnet"
	"github.com/herdbridge/herdbridge/bridge/memnet/memnettest"
	"github.com/herdbridge/herdbridge/keys"
)

// TestAttackerOnNetwork: someone with access to the network publishes
// raw messages — unsigned, tampered, signed by a key nobody trusts, by an
// unknown host, by a trusted peer posing as another host's entity,
// rerouted, replayed, expired, from the future, oversized, malformed, of
// an unknown version — while host B's worker keeps replying to host A's
// primary. Every attack message is refused by A with the right reason and
// dead-lettered, none reaches an entity, forged dead letters make no
// gateway write to their sender, and the legitimate traffic loses nothing.
func TestAttackerOnNetwork(t *testing.T) {
	// Genuine heartbeats refused by a gateway are counted apart (there must
	// be none: see the end), so that the attack is held to exact numbers.
	beatsA, beatsB := &beatReplays{hosts: "a b"}, &beatReplays{hosts: "a b"}
	c := memnettest.New(t)
	a := c.Start("a", func(cfg *bridge.Config) { cfg.Logger = slog.New(beatsA) })
	b := c.Start("b", func(cfg *bridge.Config) { cfg.Logger = slog.New(beatsB) })
	evil := newKey(t, "evil") // a compromised peer: trusted by A and B
	c.Trust("evil", evil.Public())
	stranger := newKey(t, "stranger") // trusted by nobody
	lead := a.Register(t, "lead", bridge.RolePrimary)
	other := a.Register(t, "other", bridge.RolePrimary)
	w := b.Register(t, "w", bridge.RoleWorker)
	c.Converge(t)

	fresh := func(host, from string) *bridge.Envelope {
		now := time.Now()
		return &bridge.Envelope{V: bridge.Version, Kind: bridge.KindReply, MsgID: uuid.NewString(), From: from, To: lead.GID,
			Host: host, TS: now, ExpiresAt: now.Add(time.Hour), Body: []byte("attack: " + uuid.NewString())}
	}
	sign := func(e *bridge.Envelope, k *keys.HostKey) map[string]any {
		e.Sig = k.Sign(e.SigningInput())
		return e.Headers()
	}
	// what w's gateway would publish: a template to tamper with and replay
	genuine := func(body string) *bridge.Envelope {
		e := fresh("b", w.GID)
		e.Body = []byte(body)
		e.Sig = b.Key.Sign(e.SigningInput())
		return e
	}
	inject := func(ex memnet.Exchange, key string, h map[string]any, body []byte) {
		t.Helper()
		if _, err := c.Net.Inject(ex, key, h, body); err != nil {
			t.Fatal(err)
		}
	}
	toLead := func(h map[string]any, body []byte) { inject(memnet.ExchangeMsg, lead.GID, h, body) }
	gatewayFailed := func(host string) *bridge.Envelope { // what a gateway may send as itself
		e := fresh(host, bridge.GatewayGID(host))
		e.Kind, e.Corr = bridge.KindFailed, uuid.NewString()
		return e
	}

	// legitimate traffic during the whole attack
	legit := startLegit(t, b, w.GID, "lead@a")
	got := startDrain(t, a, lead.GID, other.GID)

	const k = 5
	replays := 0
	cases := []struct {
		name, reason string
		send         func(i int)
	}{
		{"unsigned", bridge.RefuseBadSignature, func(int) { e := fresh("b", w.GID); toLead(e.Headers(), e.Body) }},
		{"tampered body", bridge.RefuseBadSignature, func(int) {
			e := genuine("real")
			toLead(e.Headers(), []byte("attack: tampered"))
		}},
		{"tampered signed header", bridge.RefuseBadSignature, func(int) {
			e := genuine("real")
			h := e.Headers()
			h[bridge.HdrTraceID] = uuid.NewString()
			toLead(h, e.Body)
		}},
		{"signed by an untrusted key, claiming host b", bridge.RefuseBadSignature, func(int) {
			e := fresh("b", w.GID)
			toLead(sign(e, stranger), e.Body)
		}},
		{"unknown host", bridge.RefuseUnknownHost, func(i int) {
			e := fresh(fmt.Sprint("nowhere-", i), uuid.NewString())
			toLead(sign(e, stranger), e.Body)
		}},
		{"from not on the signing host (evil signs as b's worker)", bridge.RefuseFromNotOnHost, func(int) {
			e := fresh("evil", w.GID)
			toLead(sign(e, evil), e.Body)
		}},
		{"a REPLY as evil's gateway itself (gateways send only FAILED)", bridge.RefuseFromNotOnHost, func(int) {
			e := fresh("evil", bridge.GatewayGID("evil"))
			toLead(sign(e, evil), e.Body)
		}},
		{"a DEAD_LETTER notice from evil's gateway in an inbox (it belongs on a control queue)", bridge.RefuseBadKind, func(int) {
			e := gatewayFailed("evil")
			e.Kind = bridge.KindDeadLetter
			toLead(sign(e, evil), e.Body)
		}},
		{"to differs from the routing key (rerouted to another inbox)", bridge.RefuseToMismatch, func(int) {
			e := genuine("attack: rerouted")
			inject(memnet.ExchangeMsg, other.GID, e.Headers(), e.Body)
		}},
		{"replayed msgId", bridge.RefuseReplayed, func(int) {
			e := genuine("replayed original") // the first copy is genuine and delivered
			replays++
			toLead(e.Headers(), e.Body)
			toLead(e.Headers(), e.Body)
		}},
		{"expired", bridge.RefuseExpired, func(int) {
			e := gatewayFailed("evil")
			e.TS, e.ExpiresAt = time.Now().Add(-time.Hour), time.Now().Add(-10*time.Minute)
			toLead(sign(e, evil), e.Body)
		}},
		{"ts too far in the future", bridge.RefuseFuture, func(int) {
			e := gatewayFailed("evil")
			e.TS, e.ExpiresAt = time.Now().Add(time.Hour), time.Now().Add(2*time.Hour)
			toLead(sign(e, evil), e.Body)
		}},
		{"oversized body", bridge.RefuseOversized, func(int) {
			e := gatewayFailed("evil")
			e.Body = []byte(strings.Repeat("a", bridge.MaxBodyBytes+1))
			toLead(sign(e, evil), e.Body)
		}},
		{"malformed or missing headers", bridge.RefuseMalformed, func(i int) {
			e := gatewayFailed("evil")
			h := sign(e, evil)
			switch i % 5 {
			case 0:
				h = nil
			case 1:
				delete(h, bridge.HdrMsgID)
			case 2:
				h[bridge.HdrV] = "1"
			case 3:
				h[bridge.HdrTS] = int64(-5)
			case 4:
				h[bridge.HdrSig] = int32(7)
			}
			toLead(h, e.Body)
		}},
		{"unsupported v", bridge.RefuseVersion, func(int) {
			e := gatewayFailed("evil")
			e.V = 2
			toLead(sign(e, evil), e.Body)
		}},
		{"presence claiming b's worker, signed by evil (trusted)", bridge.RefuseFromNotOnHost, func(int) {
			now := time.Now()
			body := fmt.Sprintf(`{"gid":%q,"name":"w","host":"evil","role":"worker"}`, w.GID)
			e := &bridge.Envelope{V: bridge.Version, Kind: bridge.KindPresence, MsgID: uuid.NewString(), From: w.GID, To: "roster.evil.w",
				Host: "evil", TS: now, ExpiresAt: now.Add(time.Minute), Body: []byte(body)}
			inject(memnet.ExchangeRoster, "roster.evil", sign(e, evil), e.Body)
		}},
		{"presence for host b signed by an untrusted key", bridge.RefuseBadSignature, func(i int) {
			now := time.Now()
			body := fmt.Sprintf(`{"gid":%q,"name":"impostor%d","host":"b","role":"worker"}`, uuid.NewString(), i)
			e := &bridge.Envelope{V: bridge.Version, Kind: bridge.KindPresence, MsgID: uuid.NewString(), To: "roster.b.impostor",
				Host: "b", TS: now, ExpiresAt: now.Add(time.Minute), Body: []byte(body)}
			inject(memnet.ExchangeRoster, "roster.b", sign(e, stranger), e.Body)
		}},
	}
	bBefore, bGenuine := b.Core.Refused(), beatsB.count()
	for _, tc := range cases {
		before, genuine := a.Core.Refused(), beatsA.count()
		for i := range k {
			tc.send(i)
		}
		var delta map[string]uint64
		memnettest.Eventually(t, tc.name+": refused", func() bool {
			delta = diff(a.Core.Refused(), before)
			if n := beatsA.count() - genuine; n > 0 {
				if delta[bridge.RefuseReplayed] -= n; delta[bridge.RefuseReplayed] == 0 {
					delete(delta, bridge.RefuseReplayed)
				}
			}
			return delta[tc.reason] >= k
		})
		if delta[tc.reason] != k || len(delta) != 1 {
			t.Errorf("%s: refusals %v, want exactly %d %s", tc.name, delta, k, tc.reason)
		}
	}

	// forged dead letters: genuine replies (and the same unsigned) written
	// straight to bridge.dlx, claiming a TTL expiry: nobody writes to w
	for i := range k {
		e := genuine(fmt.Sprint("forged dead letter ", i))
		h := e.Headers()
		h["x-first-death-reason"] = bridge.ReasonExpired
		if i%2 == 1 {
			delete(h, bridge.HdrSig)
		}
		inject(memnet.ExchangeDLX, "", h, e.Body)
	}

	legit.stop()
	got.until(t, legit.sent())
	got.stop()

	// forged presence reached B's roster queue too: B refused its copies
	memnettest.Eventually(t, "b refused the forged presence", func() bool {
		d := diff(b.Core.Refused(), bBefore)
		return d[bridge.RefuseFromNotOnHost]+d[bridge.RefuseBadSignature] >= 2*k
	})
	if d := diff(b.Core.Refused(), bBefore); d[bridge.RefuseFromNotOnHost] != k || d[bridge.RefuseBadSignature] != k ||
		d[bridge.RefuseReplayed] != beatsB.count()-bGenuine {
		t.Errorf("b's refusals: %v, want %d %s and %d %s", d, k, bridge.RefuseFromNotOnHost, k, bridge.RefuseBadSignature)
	}
	// every refused message is in a dead-letter log (whichever gateway
	// consumed it)
	wantDead := k*len(cases) + 2*k
	queues := map[string]bool{bridge.InboxQueueName(lead.GID): true, bridge.InboxQueueName(other.GID): true,
		memnet.RosterQueue("a"): true, memnet.RosterQueue("b"): true}
	var dead, forged int
	memnettest.Eventually(t, "every refused and forged message in the dead-letter logs", func() bool {
		dead, forged = 0, 0
		for _, h := range c.Hosts() {
			dl, err := h.Core.DeadLetters(100000)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range dl {
				switch {
				case strings.HasPrefix(r.Queue, "roster.") && r.To != "roster.evil.w" && r.To != "roster.b.impostor":
					// a genuine heartbeat refused (one no newer than the last
					// of its gid, say): not this attack
				case queues[r.Queue] && strings.HasPrefix(r.Reason, bridge.ReasonRejected):
					dead++
				case r.Reason == bridge.ReasonExpired && r.From == w.GID:
					forged++
					if r.Reported {
						t.Fatalf("a forged dead letter was reported to its sender: %+v", r)
					}
				}
			}
		}
		return dead >= wantDead && forged >= k
	})
	if dead != wantDead {
		t.Errorf("%d dead-lettered, want %d", dead, wantDead)
	}
	if r, _ := b.Core.Poll(ctx, w.GID, bridge.PollRequest{Max: 500}, nil); len(r.Messages) != 0 {
		t.Errorf("w got %d messages from forged dead letters, e.g. %+v", len(r.Messages), r.Messages[0])
	}

	// nothing of the attack reached an entity; the legitimate traffic lost
	// nothing and doubled nothing
	for body, n := range got.counts() {
		switch {
		case strings.HasPrefix(body, "legit-"):
			if n != 1 {
				t.Errorf("%s arrived %d times", body, n)
			}
		case body == "replayed original":
			if n != replays {
				t.Errorf("%d genuine originals of the replays arrived, want %d", n, replays)
			}
		default:
			t.Errorf("attack message reached an entity (%d times): %.60q", n, body)
		}
	}
	if n := got.legit(); n != legit.sent() || n == 0 {
		t.Errorf("legit traffic: %d sent, %d arrived", legit.sent(), n)
	}
	t.Logf("%d attack messages refused and dead-lettered; %d legit replies meanwhile, none lost; refusals on a %v", k*len(cases), legit.sent(), a.Core.Refused())
	// heartbeats of one gid are stamped strictly later at the sender, so no
	// genuine one is ever refused as a replay
	if n, m := beatsA.count(), beatsB.count(); n+m != 0 {
		t.Errorf("genuine heartbeats refused: %d by a, %d by b", n, m)
	}
}

// beatReplays counts the genuine heartbeats of hosts a gateway refused
// as replays (its log says which: kind, reason and host of each refusal).
type beatReplays struct {
	hosts string
	n     atomic.Uint64
}

func (r *beatReplays) count() uint64 { return r.n.Load() }

func (r *beatReplays) Enabled(context.Context, slog.Level) bool { return true }
func (r *beatReplays) Handle(_ context.Context, rec slog.Record) error {
	if rec.Message != "message refused" {
		return nil
	}
	attrs := map[string]string{}
	rec.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
	if attrs[bridge.LogKind] == string(bridge.KindPresence) && attrs[bridge.LogReason] == bridge.RefuseReplayed &&
		slices.Contains(strings.Fields(r.hosts), attrs["host"]) {
		r.n.Add(1)
	}
	return nil
}
func (r *beatReplays) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *beatReplays) WithGroup(string) slog.Handler      { return r }

func diff(now, before map[string]uint64) map[string]uint64 {
	d := map[string]uint64{}
	for k, v := range now {
		if v != before[k] {
			d[k] = v - before[k]
		}
	}
	return d
}

// legitSender replies from gid on h to target until stopped.
type legitSender struct {
	quit chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	n    int
}

func startLegit(t *testing.T, h *memnettest.Host, gid, target string) *legitSender {
	l := &legitSender{quit: make(chan struct{})}
	l.wg.Go(func() {
		for i := 0; i < 2000; i++ {
			select {
			case <-l.quit:
				return
			default:
			}
			if _, err := h.Core.Send(ctx, gid, bridge.SendRequest{Target: target, Message: fmt.Sprintf("legit-%05d", i)}, nil); err != nil {
				t.Errorf("legit send: %v", err)
				return
			}
			l.mu.Lock()
			l.n++
			l.mu.Unlock()
			time.Sleep(time.Millisecond) // a pace, not a wait: traffic all along the attack
		}
	})
	return l
}

func (l *legitSender) stop() { close(l.quit); l.wg.Wait() }

func (l *legitSender) sent() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// drainer polls the held messages of some entities, as primaries would,
// and counts them by body.
type drainer struct {
	quit chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	got  map[string]int
}

func startDrain(t *testing.T, h *memnettest.Host, gids ...string) *drainer {
	d := &drainer{quit: make(chan struct{}), got: map[string]int{}}
	d.wg.Go(func() {
		for {
			select {
			case <-d.quit:
				return
			default:
			}
			for _, gid := range gids {
				r, err := h.Core.Poll(ctx, gid, bridge.PollRequest{Max: 500, Wait: 50 * time.Millisecond}, nil)
				if err != nil {
					t.Errorf("poll: %v", err)
					return
				}
				d.mu.Lock()
				for _, m := range r.Messages {
					d.got[m.Body]++
				}
				d.mu.Unlock()
			}
		}
	})
	return d
}

func (d *drainer) stop() { close(d.quit); d.wg.Wait() }

func (d *drainer) counts() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.got)
}

func (d *drainer) legit() int {
	n := 0
	for body := range d.counts() {
		if strings.HasPrefix(body, "legit-") {
			n++
		}
	}
	return n
}

// until waits for n distinct legit messages.
func (d *drainer) until(t *testing.T, n int) {
	t.Helper()
	memnettest.Eventually(t, fmt.Sprintf("%d legit messages drained", n), func() bool { return d.legit() >= n })
}

// TestNoPresenceRace: a message sent right after its sender registered is
// not refused for a missing presence — 20 workers on B register and reply
// at once — and a message whose sender's signed heartbeat comes after it
// waits for it, while one whose heartbeat never comes is refused once
// PresenceWait is over.
func TestNoPresenceRace(t *testing.T) {
	c := memnettest.New(t)
	// long enough for a heartbeat on a loaded machine (one came after
	// 644 ms at load 14), short enough to see the "never" case refused
	a := c.Start("a", func(cfg *bridge.Config) { cfg.PresenceWait = 2 * time.Second })
	b := c.Start("b")
	late := newKey(t, "late")
	c.Trust("late", late.Public())
	lead := a.Register(t, "lead", bridge.RolePrimary)
	c.Converge(t)
	const workers = 20
	for i := range workers {
		w := b.Register(t, fmt.Sprintf("w%02d", i), bridge.RoleWorker)
		if _, err := b.Core.Send(ctx, w.GID, bridge.SendRequest{Target: "lead@a", Message: fmt.Sprintf("first words %02d", i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]bool{} // (in any order: one may wait for its sender's heartbeat)
	memnettest.Eventually(t, "every worker's first words arrived", func() bool {
		r, err := a.Core.Poll(ctx, lead.GID, bridge.PollRequest{Max: 500, Wait: 100 * time.Millisecond}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range r.Messages {
			got[m.Body] = true
		}
		return len(got) == workers
	})
	if n := a.Core.Refused()[bridge.RefuseFromNotOnHost]; n != 0 {
		t.Fatalf("%d refused for a presence race", n)
	}

	publish := func(ex memnet.Exchange, key string, e *bridge.Envelope) {
		e.Sig = late.Sign(e.SigningInput())
		if _, err := c.Net.Inject(ex, key, e.Headers(), e.Body); err != nil {
			t.Fatal(err)
		}
	}
	msg := func(from, body string) *bridge.Envelope {
		now := time.Now()
		return &bridge.Envelope{V: bridge.Version, Kind: bridge.KindReply, MsgID: uuid.NewString(), From: from, To: lead.GID, Host: "late", TS: now, ExpiresAt: now.Add(time.Hour), Body: []byte(body)}
	}
	slow, never := uuid.NewString(), uuid.NewString()
	publish(memnet.ExchangeMsg, lead.GID, msg(slow, "before my heartbeat"))
	publish(memnet.ExchangeMsg, lead.GID, msg(never, "no heartbeat ever"))
	now := time.Now()
	publish(memnet.ExchangeRoster, "roster.late", &bridge.Envelope{V: bridge.Version, Kind: bridge.KindPresence, MsgID: uuid.NewString(), From: slow,
		To: "roster.late.slow", Host: "late", TS: now, ExpiresAt: now.Add(time.Minute),
		Body: fmt.Appendf(nil, `{"gid":%q,"name":"slow","host":"late","role":"worker"}`, slow)})
	if got := drainUntil(t, a, lead.GID, "before my heartbeat"); len(got) != 1 {
		t.Fatalf("after the heartbeat: %q", bodies(got))
	}
	memnettest.Eventually(t, "the message with no heartbeat refused at PresenceWait", func() bool {
		return a.Core.Refused()[bridge.RefuseFromNotOnHost] == 1
	})
	if r, _ := a.Core.Poll(ctx, lead.GID, bridge.PollRequest{Max: 10}, nil); len(r.Messages) != 0 {
		t.Fatalf("delivered without its sender's presence: %+v", r.Messages)
	}
}
