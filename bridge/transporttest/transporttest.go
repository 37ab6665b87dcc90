// Package transporttest is the conformance suite of bridge.Transport: the
// observable semantics of SPEC §3–§6 (routing keys, broadcast groups,
// prefetch, redelivery, dead-lettering, caps, TTL, durability) that every
// transport — the embedded store, the AMQP broker and the in-memory
// network alike — must show; and of the optional bridge.PresenceTransport
// and bridge.ControlTransport (SPEC §7), for the transports that have them.
//
// A transport's own test runs it:
//
//	func TestConformance(t *testing.T) {
//		transporttest.Run(t, transporttest.Factory{New: ..., Reopen: ...})
//	}
//
// Every subtest mints its own gids, groups and traceId (random UUIDs), and
// deletes the inboxes it declared when it ends, so a shared broker is fine.
// Deliveries and dead letters whose traceId or msgId the subtest did not
// mint are settled and ignored. Subtests run one after another unless
// Factory.Parallel is set: on a broker broadcast.all reaches every inbox,
// and a stranger's message in a prefetch window would skew its count.
package transporttest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
)

// Factory makes the transports under test.
type Factory struct {
	// New returns a fresh transport (its own store, or a connection to the
	// broker). The suite closes it when the subtest ends. Required.
	New func(t *testing.T) bridge.Transport
	// Reopen closes old and returns a new transport over the same
	// underlying state (the same store file, the same broker), as a gateway
	// restart would. The suite closes the result. nil skips the durability
	// cases.
	Reopen func(t *testing.T, old bridge.Transport) bridge.Transport
	// Timeout bounds every wait for something that must happen
	// (default 5 s).
	Timeout time.Duration
	// Grace is how long the suite watches for something that must not
	// happen, e.g. a delivery past the prefetch bound (default 250 ms).
	Grace time.Duration
	// Peer returns another gateway's transport on what tr is connected to
	// (the same broker, the same network), for the cases that need two
	// hosts. The suite closes it. nil skips those cases.
	Peer func(t *testing.T, tr bridge.Transport) bridge.Transport
	// Parallel runs the subtests in parallel. Set it only when every
	// transport New returns is isolated from the others (its own store or
	// vhost): on a shared broker broadcast.all crosses subtests.
	Parallel bool
	// InboxQueue is the queue name dead letters of gid's inbox give
	// (nil: bridge.InboxQueueName); ControlQueue is host's control queue
	// (nil: "control."+host). A broker's quorum queues have their own.
	InboxQueue   func(gid string) string
	ControlQueue func(host string) string
	// SingleActive: a second consumer of an inbox or control queue is not
	// refused but waits, receiving nothing, until the first is cancelled,
	// and then takes over (a quorum queue's single active consumer).
	SingleActive bool
	// SoftMaxLength: a full inbox takes messages again only once it has
	// drained below a low-water mark of its cap, not as soon as one
	// leaves (a quorum queue's reject-publish).
	SoftMaxLength bool
}

// inboxQueue is the name f's dead letters give gid's inbox.
func (f Factory) inboxQueue(gid string) string {
	if f.InboxQueue != nil {
		return f.InboxQueue(gid)
	}
	return bridge.InboxQueueName(gid)
}

// controlQueue is the name f's dead letters give host's control queue.
func (f Factory) controlQueue(host string) string {
	if f.ControlQueue != nil {
		return f.ControlQueue(host)
	}
	return "control." + host
}

// Run runs the conformance suite against f.
func Run(t *testing.T, f Factory) {
	t.Helper()
	if f.New == nil {
		t.Fatal("transporttest: Factory.New is required")
	}
	if f.Timeout <= 0 {
		f.Timeout = 5 * time.Second
	}
	if f.Grace <= 0 {
		f.Grace = 250 * time.Millisecond
	}
	cases := []struct {
		name string
		fn   func(*harness)
	}{
		{"PointToPointIntact", testPointToPointIntact},
		{"MandatoryUnroutable", testMandatoryUnroutable},
		{"NonMandatoryUnroutable", testNonMandatoryUnroutable},
		{"BroadcastRouting", testBroadcastRouting},
		{"RedeclareReplacesBindings", testRedeclareReplacesBindings},
		{"PrefetchBound", testPrefetchBound},
		{"RedeliverUnackedAfterCancel", testRedeliverAfterCancel},
		{"RejectDeadLetters", testRejectDeadLetters},
		{"MaxLength", testMaxLength},
		{"MaxLengthCountsReadyOnly", testMaxLengthReadyOnly},
		{"MessageTTL", testMessageTTL},
		{"MessageTTLBehindFullWindow", testTTLBehindFullWindow},
		{"DeleteInbox", testDeleteInbox},
		{"CloseInbox", testCloseInbox},
		{"SecondConsumer", testSecondConsumer},
		{"OrderOnePublisher", testOrder},
		{"ConcurrentPublishers", testConcurrentPublishers},
		{"Closed", testClosed},
		{"ReopenKeepsUnacked", testReopen},
		{"PresenceFanOut", testPresenceFanOut},
		{"PresenceExclusivePerHost", testPresenceExclusive},
		{"PresenceRejectDeadLetters", testPresenceReject},
		{"ControlRouting", testControlRouting},
		{"ControlRedeliverUnacked", testControlRedeliver},
		{"ControlExclusive", testControlExclusive},
		{"ControlRejectDeadLetters", testControlReject},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if f.Parallel {
				t.Parallel()
			}
			c.fn(newHarness(t, f))
		})
	}
}

// harness is one subtest's world: its transport(s), what it declared and
// subscribed, and the ids it minted.
type harness struct {
	t     *testing.T
	f     Factory
	trace string // traceId of every envelope this subtest publishes
	host  string

	mu     sync.Mutex
	tr     bridge.Transport // current
	opened []bridge.Transport
	gids   []string
	subs   []bridge.Subscription
	mine   map[string]bool // msgIds minted here
	acks   sync.WaitGroup  // background settles
}

func newHarness(t *testing.T, f Factory) *harness {
	h := &harness{t: t, f: f, trace: uuid.NewString(), host: "conformance-host", mine: map[string]bool{}}
	tr := f.New(t)
	if tr == nil {
		t.Fatal("Factory.New returned nil")
	}
	h.tr = tr
	h.opened = append(h.opened, tr)
	// One cleanup, so the order holds whatever the subtest reopened:
	// subscriptions, then inboxes (on the current transport), then close.
	t.Cleanup(func() {
		h.mu.Lock()
		subs, gids, opened, cur := h.subs, h.gids, h.opened, h.tr
		h.mu.Unlock()
		for _, s := range subs {
			s.Cancel()
		}
		h.acks.Wait()
		for _, gid := range gids {
			ctx, cancel := context.WithTimeout(context.Background(), f.Timeout)
			_ = cur.DeleteInbox(ctx, gid)
			cancel()
		}
		for i := len(opened) - 1; i >= 0; i-- {
			_ = opened[i].Close()
		}
	})
	return h
}

func (h *harness) cur() bridge.Transport {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.tr
}

func (h *harness) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), h.f.Timeout)
	h.t.Cleanup(cancel)
	return ctx
}

// reopen swaps in Factory.Reopen's transport. Subscriptions on the old one
// are cancelled first and settles in flight are waited for.
func (h *harness) reopen() {
	h.t.Helper()
	h.mu.Lock()
	subs := h.subs
	h.subs = nil
	h.mu.Unlock()
	for _, s := range subs {
		s.Cancel()
	}
	h.acks.Wait()
	old := h.cur()
	tr := h.f.Reopen(h.t, old)
	if tr == nil {
		h.t.Fatal("Factory.Reopen returned nil")
	}
	h.mu.Lock()
	h.tr = tr
	h.opened = append(h.opened, tr)
	h.mu.Unlock()
}

// group returns a fresh group name.
func (h *harness) group() string {
	return "g" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16]
}

// declare declares a fresh inbox and returns its gid; it is deleted when
// the subtest ends.
func (h *harness) declare(spec bridge.InboxSpec) string {
	h.t.Helper()
	gid := uuid.NewString()
	h.redeclare(gid, spec)
	h.mu.Lock()
	h.gids = append(h.gids, gid)
	h.mu.Unlock()
	return gid
}

func (h *harness) redeclare(gid string, spec bridge.InboxSpec) {
	h.t.Helper()
	if err := h.cur().DeclareInbox(h.ctx(), gid, spec); err != nil {
		h.t.Fatalf("DeclareInbox %s %+v: %v", gid, spec, err)
	}
}

// env builds a valid envelope of this subtest addressed to to.
func (h *harness) env(kind bridge.Kind, to, body string) *bridge.Envelope {
	return h.envOf(h.host, kind, to, body)
}

// envOf is env published by the gateway of host.
func (h *harness) envOf(host string, kind bridge.Kind, to, body string) *bridge.Envelope {
	ts := time.UnixMilli(time.Now().UnixMilli())
	sig := make([]byte, 64)
	_, _ = rand.Read(sig)
	e := &bridge.Envelope{
		V: bridge.Version, Kind: kind, MsgID: uuid.NewString(), TraceID: h.trace,
		From: uuid.NewString(), To: to, Host: host,
		TS: ts, ExpiresAt: ts.Add(10 * time.Minute), Sig: sig, Body: []byte(body),
	}
	if kind == bridge.KindSpawn {
		e.SpawnID = uuid.NewString()
	}
	switch kind {
	case bridge.KindAnswer, bridge.KindTooLate, bridge.KindAsk:
		e.TurnID = uuid.NewString()
	}
	switch kind {
	case bridge.KindAnswer, bridge.KindTooLate, bridge.KindInjected, bridge.KindFailed,
		bridge.KindNoWaiter, bridge.KindAbandoned:
		e.Corr = uuid.NewString()
	}
	if err := e.Validate(); err != nil {
		h.t.Fatalf("test envelope invalid: %v", err)
	}
	h.mu.Lock()
	h.mine[e.MsgID] = true
	h.mu.Unlock()
	return e
}

// reply builds a point-to-point REPLY to gid.
func (h *harness) reply(gid, body string) *bridge.Envelope {
	return h.env(bridge.KindReply, gid, body)
}

// broadcast builds a BROADCAST to key.
func (h *harness) broadcast(key, body string) *bridge.Envelope {
	return h.env(bridge.KindBroadcast, key, body)
}

func (h *harness) publish(key string, e *bridge.Envelope, mandatory bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), h.f.Timeout)
	defer cancel()
	return h.cur().Publish(ctx, key, e, mandatory)
}

// mustPublish publishes point to point (mandatory) and fails on error.
func (h *harness) mustPublish(gid string, e *bridge.Envelope) {
	h.t.Helper()
	if err := h.publish(gid, e, true); err != nil {
		h.t.Fatalf("Publish %s to %s: %v", e.MsgID, gid, err)
	}
}

func (h *harness) isMine(msgID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mine[msgID]
}

// sink collects what a handler is given, for bounded waits.
type sink[T any] struct {
	mu     sync.Mutex
	items  []T
	notify chan struct{}
}

func newSink[T any]() *sink[T] { return &sink[T]{notify: make(chan struct{}, 1)} }

func (s *sink[T]) add(v T) {
	s.mu.Lock()
	s.items = append(s.items, v)
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

func (s *sink[T]) snapshot() []T {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]T(nil), s.items...)
}

// inbox is a consumer under test.
type inbox struct {
	h   *harness
	gid string
	sub bridge.Subscription
	got *sink[bridge.Delivery]
}

// consume attaches a consumer to gid. With autoAck, every delivery of this
// subtest is acked (off the handler goroutine) once recorded.
func (h *harness) consume(gid string, prefetch int, autoAck bool) *inbox {
	h.t.Helper()
	ib, err := h.tryConsume(gid, prefetch, autoAck)
	if err != nil {
		h.t.Fatalf("Consume %s: %v", gid, err)
	}
	return ib
}

func (h *harness) tryConsume(gid string, prefetch int, autoAck bool) (*inbox, error) {
	return h.subscribe(gid, autoAck, func(f func(bridge.Delivery)) (bridge.Subscription, error) {
		return h.cur().Consume(context.Background(), gid, prefetch, f)
	})
}

// subscribe attaches a consumer of deliveries with attach; name is for
// messages (a gid, a roster or control queue).
func (h *harness) subscribe(name string, autoAck bool, attach func(func(bridge.Delivery)) (bridge.Subscription, error)) (*inbox, error) {
	ib := &inbox{h: h, gid: name, got: newSink[bridge.Delivery]()}
	sub, err := attach(func(d bridge.Delivery) {
		if d.Env == nil || d.Env.TraceID != h.trace {
			h.settle("ack stranger", d.Acker.Ack) // not ours (shared broker)
			return
		}
		ib.got.add(d)
		if autoAck {
			h.settle("ack "+d.Env.MsgID, d.Acker.Ack)
		}
	})
	if err != nil {
		return nil, err
	}
	if sub == nil {
		h.t.Fatalf("consumer of %s: nil subscription", name)
	}
	ib.sub = sub
	h.mu.Lock()
	h.subs = append(h.subs, sub)
	h.mu.Unlock()
	return ib, nil
}

// settle runs an ack off the handler goroutine (handlers must not block).
func (h *harness) settle(what string, f func() error) {
	h.acks.Add(1)
	go func() {
		defer h.acks.Done()
		if err := f(); err != nil {
			h.t.Errorf("%s: %v", what, err)
		}
	}()
}

// waitN waits until at least n deliveries arrived and returns them.
func (ib *inbox) waitN(n int) []bridge.Delivery {
	ib.h.t.Helper()
	return waitFor(ib.h, ib.got, n, "deliveries on "+ib.gid)
}

// exactly waits for n deliveries, then watches for Grace that no more come.
func (ib *inbox) exactly(n int) []bridge.Delivery {
	ib.h.t.Helper()
	if n > 0 {
		ib.waitN(n)
	}
	time.Sleep(ib.h.f.Grace)
	got := ib.got.snapshot()
	if len(got) != n {
		ib.h.t.Fatalf("inbox %s: got %d deliveries, want exactly %d: %s", ib.gid, len(got), n, describe(got))
	}
	return got
}

func (ib *inbox) cancel() { ib.sub.Cancel() }

func waitFor[T any](h *harness, s *sink[T], n int, what string) []T {
	h.t.Helper()
	deadline := time.NewTimer(h.f.Timeout)
	defer deadline.Stop()
	for {
		if got := s.snapshot(); len(got) >= n {
			return got
		}
		select {
		case <-s.notify:
		case <-deadline.C:
			got := s.snapshot()
			h.t.Fatalf("after %v: %d %s, want %d", h.f.Timeout, len(got), what, n)
			return nil
		}
	}
}

func describe(ds []bridge.Delivery) string {
	var b strings.Builder
	for i, d := range ds {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", d.Env.Body)
	}
	return "[" + b.String() + "]"
}

// dlq is a dead-letter consumer that keeps this subtest's dead letters.
type dlq struct {
	h   *harness
	got *sink[bridge.DeadLetter]
}

// deadLetters attaches the dead-letter consumer. This subtest's dead
// letters are recorded and acked; anyone else's are left unsettled (they
// go back to the queue when the subscription ends).
func (h *harness) deadLetters() *dlq {
	h.t.Helper()
	q := &dlq{h: h, got: newSink[bridge.DeadLetter]()}
	sub, err := h.cur().ConsumeDeadLetters(context.Background(), func(dl bridge.DeadLetter) {
		id := dl.MsgID
		if dl.Env != nil {
			id = dl.Env.MsgID
		}
		if !h.isMine(id) {
			return
		}
		q.got.add(dl)
		h.settle("ack dead letter "+id, dl.Acker.Ack)
	})
	if err != nil {
		h.t.Fatalf("ConsumeDeadLetters: %v", err)
	}
	h.mu.Lock()
	h.subs = append(h.subs, sub)
	h.mu.Unlock()
	return q
}

func (q *dlq) waitN(n int) []bridge.DeadLetter {
	q.h.t.Helper()
	return waitFor(q.h, q.got, n, "dead letters")
}

func (q *dlq) exactly(n int) []bridge.DeadLetter {
	q.h.t.Helper()
	if n > 0 {
		q.waitN(n)
	}
	time.Sleep(q.h.f.Grace)
	got := q.got.snapshot()
	if len(got) != n {
		var ids []string
		for _, dl := range got {
			ids = append(ids, dl.MsgID+"/"+dl.Reason)
		}
		q.h.t.Fatalf("got %d dead letters %v, want exactly %d", len(got), ids, n)
	}
	return got
}

// sameEnvelope reports how got differs from want (every header and the
// body), or "".
func sameEnvelope(got, want *bridge.Envelope) string {
	if got == nil {
		return "envelope is nil"
	}
	gh, wh := got.Headers(), want.Headers()
	if !reflect.DeepEqual(gh, wh) {
		return fmt.Sprintf("headers differ:\n got  %v\n want %v", gh, wh)
	}
	if !bytes.Equal(got.Body, want.Body) {
		return fmt.Sprintf("body differs: got %q, want %q", got.Body, want.Body)
	}
	if !bytes.Equal(got.SigningInput(), want.SigningInput()) {
		return "signing input differs"
	}
	if err := got.Validate(); err != nil {
		return "delivered envelope does not validate: " + err.Error()
	}
	return ""
}

func bodies(ds []bridge.Delivery) []string {
	var out []string
	for _, d := range ds {
		out = append(out, string(d.Env.Body))
	}
	return out
}

func wantBodies(t *testing.T, what string, ds []bridge.Delivery, want ...string) {
	t.Helper()
	if got := bodies(ds); !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: got %q, want %q", what, got, want)
	}
}

func mustAck(t *testing.T, d bridge.Delivery) {
	t.Helper()
	if err := d.Acker.Ack(); err != nil {
		t.Fatalf("Ack %q: %v", d.Env.Body, err)
	}
}

// --- the cases ---

func testPointToPointIntact(h *harness) {
	t := h.t
	gid := h.declare(bridge.InboxSpec{})
	ib := h.consume(gid, 10, false)
	// ANSWER carries every optional header; the body is multibyte UTF-8.
	e := h.env(bridge.KindAnswer, gid, "answer: naïve café — 東京 ✓ 🚀\nsecond line\x00after NUL")
	e.SpawnID = uuid.NewString()
	h.mustPublish(gid, e)
	d := ib.exactly(1)[0]
	if diff := sameEnvelope(d.Env, e); diff != "" {
		t.Fatalf("delivered envelope is not the published one: %s", diff)
	}
	if d.Redelivered {
		t.Error("first delivery is marked Redelivered")
	}
	if d.Key != gid || d.Err != nil {
		t.Errorf("delivery key %q err %v, want the routing key %q and no error", d.Key, d.Err, gid)
	}
	if d.Acker == nil {
		t.Fatal("delivery has no Acker")
	}
	mustAck(t, d)
	// acked: the next consumer gets nothing
	ib.cancel()
	h.consume(gid, 10, false).exactly(0)
}

func testMandatoryUnroutable(h *harness) {
	t := h.t
	h.declare(bridge.InboxSpec{Groups: []string{h.group()}}) // something exists
	nobody := uuid.NewString()
	if err := h.publish(nobody, h.reply(nobody, "lost"), true); !errors.Is(err, bridge.ErrUnroutable) {
		t.Errorf("mandatory publish to unbound gid: err = %v, want ErrUnroutable", err)
	}
	key := bridge.BroadcastKey(h.group())
	if err := h.publish(key, h.broadcast(key, "lost"), true); !errors.Is(err, bridge.ErrUnroutable) {
		t.Errorf("mandatory publish to unbound group: err = %v, want ErrUnroutable", err)
	}
}

func testNonMandatoryUnroutable(h *harness) {
	t := h.t
	key := bridge.BroadcastKey(h.group())
	if err := h.publish(key, h.broadcast(key, "to nobody"), false); err != nil {
		t.Errorf("non-mandatory broadcast to unbound group: %v, want nil", err)
	}
	nobody := uuid.NewString()
	if err := h.publish(nobody, h.reply(nobody, "to nobody"), false); err != nil {
		t.Errorf("non-mandatory publish to unbound gid: %v, want nil", err)
	}
}

func testBroadcastRouting(h *harness) {
	t := h.t
	g1, g2 := h.group(), h.group()
	a := h.consume(h.declare(bridge.InboxSpec{Groups: []string{g1}}), 10, true)
	b := h.consume(h.declare(bridge.InboxSpec{Groups: []string{g1, g2}}), 10, true)
	c := h.consume(h.declare(bridge.InboxSpec{}), 10, true)
	for _, p := range []struct{ key, body string }{
		{bridge.BroadcastAll, "all"}, {bridge.BroadcastKey(g1), "g1"}, {bridge.BroadcastKey(g2), "g2"},
	} {
		e := h.broadcast(p.key, p.body)
		if err := h.publish(p.key, e, false); err != nil {
			t.Fatalf("broadcast to %s: %v", p.key, err)
		}
	}
	// a bound broadcast key is routable: mandatory is fine too
	if err := h.publish(bridge.BroadcastKey(g2), h.broadcast(bridge.BroadcastKey(g2), "g2 again"), true); err != nil {
		t.Fatalf("mandatory broadcast to bound group: %v", err)
	}
	wantBodies(t, "member of g1", a.exactly(2), "all", "g1")
	wantBodies(t, "member of g1 and g2", b.exactly(4), "all", "g1", "g2", "g2 again")
	wantBodies(t, "member of no group", c.exactly(1), "all")
	for _, d := range b.got.snapshot() {
		if !bridge.IsBroadcastKey(d.Env.To) || d.Env.Kind != bridge.KindBroadcast {
			t.Errorf("broadcast delivered as kind %s to %q", d.Env.Kind, d.Env.To)
		}
		if d.Key != d.Env.To {
			t.Errorf("broadcast to %q delivered with routing key %q", d.Env.To, d.Key)
		}
	}
}

func testRedeclareReplacesBindings(h *harness) {
	t := h.t
	g1, g2 := h.group(), h.group()
	k1, k2 := bridge.BroadcastKey(g1), bridge.BroadcastKey(g2)
	gid := h.declare(bridge.InboxSpec{Groups: []string{g1}})
	h.mustPublish(gid, h.reply(gid, "held across redeclare"))
	h.redeclare(gid, bridge.InboxSpec{Groups: []string{g2}})
	h.redeclare(gid, bridge.InboxSpec{Groups: []string{g2}}) // idempotent
	if err := h.publish(k1, h.broadcast(k1, "old group"), true); !errors.Is(err, bridge.ErrUnroutable) {
		t.Errorf("mandatory broadcast to the dropped group: err = %v, want ErrUnroutable", err)
	}
	if err := h.publish(k2, h.broadcast(k2, "new group"), true); err != nil {
		t.Fatalf("broadcast to the new group: %v", err)
	}
	ib := h.consume(gid, 10, true)
	wantBodies(t, "after redeclare", ib.exactly(2), "held across redeclare", "new group")
}

func testPrefetchBound(h *harness) {
	t := h.t
	gid := h.declare(bridge.InboxSpec{})
	for i := range 10 {
		h.mustPublish(gid, h.reply(gid, fmt.Sprint(i)))
	}
	ib := h.consume(gid, 3, false)
	got := ib.exactly(3)
	wantBodies(t, "first window", got, "0", "1", "2")
	mustAck(t, got[1])
	got = ib.exactly(4)
	wantBodies(t, "after one ack", got, "0", "1", "2", "3")
	// a reject opens the window too
	if err := got[0].Acker.Reject("test"); err != nil {
		t.Fatalf("Reject: %v", err)
	}
	wantBodies(t, "after a reject", ib.exactly(5), "0", "1", "2", "3", "4")
}

func testRedeliverAfterCancel(h *harness) {
	t := h.t
	gid := h.declare(bridge.InboxSpec{})
	for i := range 5 {
		h.mustPublish(gid, h.reply(gid, fmt.Sprint(i)))
	}
	ib := h.consume(gid, 10, false)
	got := ib.exactly(5)
	mustAck(t, got[0])
	mustAck(t, got[3])
	ib.cancel()

	ib2 := h.consume(gid, 10, false)
	got = ib2.exactly(3)
	wantBodies(t, "redelivered", got, "1", "2", "4")
	for _, d := range got {
		if !d.Redelivered {
			t.Errorf("redelivery of %q not marked Redelivered", d.Env.Body)
		}
		mustAck(t, d)
	}
	ib2.cancel()
	h.consume(gid, 10, false).exactly(0)
}

func testRejectDeadLetters(h *harness) {
	t := h.t
	dead := h.deadLetters()
	gid := h.declare(bridge.InboxSpec{})
	e := h.env(bridge.KindSend, gid, "poison — ☠")
	h.mustPublish(gid, e)
	ib := h.consume(gid, 10, false)
	if err := ib.exactly(1)[0].Acker.Reject("bad signature"); err != nil {
		t.Fatalf("Reject: %v", err)
	}
	dl := dead.exactly(1)[0]
	if !strings.HasPrefix(dl.Reason, bridge.ReasonRejected) {
		t.Errorf("Reason = %q, want prefix %q", dl.Reason, bridge.ReasonRejected)
	}
	if dl.MsgID != e.MsgID {
		t.Errorf("MsgID = %q, want %q", dl.MsgID, e.MsgID)
	}
	if dl.Queue != h.f.inboxQueue(gid) {
		t.Errorf("Queue = %q, want %q", dl.Queue, h.f.inboxQueue(gid))
	}
	if dl.At.IsZero() {
		t.Error("At is zero")
	}
	if diff := sameEnvelope(dl.Env, e); diff != "" {
		t.Errorf("dead-lettered envelope: %s", diff)
	}
	// a rejected message is not requeued
	ib.cancel()
	h.consume(gid, 10, false).exactly(0)
}

func testMaxLength(h *harness) {
	t := h.t
	dead := h.deadLetters()
	gid := h.declare(bridge.InboxSpec{MaxLength: 3})
	for i := range 3 {
		h.mustPublish(gid, h.reply(gid, fmt.Sprint(i)))
	}
	over := h.reply(gid, "over the cap")
	if err := h.publish(gid, over, true); !errors.Is(err, bridge.ErrInboxFull) {
		t.Fatalf("publish over MaxLength: err = %v, want ErrInboxFull", err)
	}
	dl := dead.exactly(1)[0]
	if dl.Reason != bridge.ReasonMaxLen {
		t.Errorf("Reason = %q, want %q", dl.Reason, bridge.ReasonMaxLen)
	}
	if dl.Queue != h.f.inboxQueue(gid) {
		t.Errorf("Queue = %q, want %q", dl.Queue, h.f.inboxQueue(gid))
	}
	if diff := sameEnvelope(dl.Env, over); diff != "" {
		t.Errorf("dead-lettered envelope: %s", diff)
	}
	ib := h.consume(gid, 1, false)
	got := ib.exactly(1)
	mustAck(t, got[0]) // one leaves: room for one more
	ib.waitN(2)
	h.mustPublish(gid, h.reply(gid, "fits again"))
	ib.cancel()
	wantBodies(t, "inbox after the cap", h.consume(gid, 10, true).exactly(3), "1", "2", "fits again")
}

// testMaxLengthReadyOnly: as on the broker, messages handed to the consumer
// and not yet settled do not count towards the cap.
func testMaxLengthReadyOnly(h *harness) {
	t := h.t
	gid := h.declare(bridge.InboxSpec{MaxLength: 2})
	ib := h.consume(gid, 2, false)
	h.mustPublish(gid, h.reply(gid, "0"))
	h.mustPublish(gid, h.reply(gid, "1"))
	got := ib.exactly(2) // both outstanding; none ready
	h.mustPublish(gid, h.reply(gid, "2"))
	h.mustPublish(gid, h.reply(gid, "3"))
	if err := h.publish(gid, h.reply(gid, "4"), true); !errors.Is(err, bridge.ErrInboxFull) {
		t.Fatalf("publish with 2 ready at MaxLength 2: err = %v, want ErrInboxFull", err)
	}
	mustAck(t, got[0])
	ib.waitN(3) // "2" moves from ready to outstanding
	if h.f.SoftMaxLength {
		wantBodies(t, "deliveries", ib.exactly(3), "0", "1", "2")
		return // one ready of a cap of 2 is not below the low-water mark
	}
	h.mustPublish(gid, h.reply(gid, "5"))
	wantBodies(t, "deliveries", ib.exactly(3), "0", "1", "2")
}

func testMessageTTL(h *harness) {
	t := h.t
	dead := h.deadLetters()
	const ttl = 300 * time.Millisecond
	gid := h.declare(bridge.InboxSpec{MessageTTL: ttl})
	e := h.reply(gid, "nobody reads me")
	start := time.Now()
	h.mustPublish(gid, e)
	dl := dead.waitN(1)[0]
	if el := time.Since(start); el < ttl {
		t.Errorf("dead-lettered after %v, before the TTL of %v", el, ttl)
	}
	if dl.Reason != bridge.ReasonExpired {
		t.Errorf("Reason = %q, want %q", dl.Reason, bridge.ReasonExpired)
	}
	if dl.Queue != h.f.inboxQueue(gid) {
		t.Errorf("Queue = %q, want %q", dl.Queue, h.f.inboxQueue(gid))
	}
	if diff := sameEnvelope(dl.Env, e); diff != "" {
		t.Errorf("dead-lettered envelope: %s", diff)
	}
	dead.exactly(1)
	h.consume(gid, 10, false).exactly(0)
}

// testTTLBehindFullWindow: the backlog behind a full prefetch window
// expires; the delivered, unsettled message does not.
func testTTLBehindFullWindow(h *harness) {
	t := h.t
	dead := h.deadLetters()
	const ttl = 400 * time.Millisecond
	gid := h.declare(bridge.InboxSpec{MessageTTL: ttl})
	ib := h.consume(gid, 1, false)
	h.mustPublish(gid, h.reply(gid, "held"))
	held := ib.waitN(1)[0]
	backlog := h.reply(gid, "backlog")
	h.mustPublish(gid, backlog)
	dl := dead.waitN(1)[0]
	if dl.MsgID != backlog.MsgID || dl.Reason != bridge.ReasonExpired {
		t.Fatalf("dead letter %s/%q, want %s/%q", dl.MsgID, dl.Reason, backlog.MsgID, bridge.ReasonExpired)
	}
	dead.exactly(1) // the held one stays held, past its TTL
	mustAck(t, held)
	ib.exactly(1)
}

func testDeleteInbox(h *harness) {
	t := h.t
	g := h.group()
	a := h.declare(bridge.InboxSpec{Groups: []string{g}})
	b := h.declare(bridge.InboxSpec{Groups: []string{g}})
	h.mustPublish(a, h.reply(a, "dropped with the inbox"))
	ibB := h.consume(b, 10, true)
	if err := h.cur().DeleteInbox(h.ctx(), a); err != nil {
		t.Fatalf("DeleteInbox: %v", err)
	}
	if err := h.cur().DeleteInbox(h.ctx(), a); err != nil {
		t.Errorf("DeleteInbox of a deleted inbox: %v, want nil", err)
	}
	if err := h.publish(a, h.reply(a, "too late"), true); !errors.Is(err, bridge.ErrUnroutable) {
		t.Errorf("mandatory publish to a deleted inbox: err = %v, want ErrUnroutable", err)
	}
	for _, key := range []string{bridge.BroadcastAll, bridge.BroadcastKey(g)} {
		if err := h.publish(key, h.broadcast(key, key), false); err != nil {
			t.Fatalf("broadcast %s: %v", key, err)
		}
	}
	wantBodies(t, "surviving member", ibB.exactly(2), bridge.BroadcastAll, bridge.BroadcastKey(g))
	// declared anew, the inbox is empty: nothing it held, no broadcast
	h.redeclare(a, bridge.InboxSpec{Groups: []string{g}})
	h.consume(a, 10, false).exactly(0)
}

// testCloseInbox: a closed inbox is routed nothing more — a mandatory
// publish to it is unroutable, broadcasts pass it by — while what it held
// is still delivered, and it counts what waits until that is settled (a
// removal deletes an inbox only once nothing waits in it).
func testCloseInbox(h *harness) {
	t := h.t
	g := h.group()
	a := h.declare(bridge.InboxSpec{Groups: []string{g}})
	for i := range 3 {
		h.mustPublish(a, h.reply(a, fmt.Sprintf("held before the close %d", i)))
	}
	if n, err := h.cur().CloseInbox(h.ctx(), a); err != nil || n != 3 {
		t.Fatalf("CloseInbox with 3 stored: %d, %v; want 3, nil", n, err)
	}
	if err := h.publish(a, h.reply(a, "after the close"), true); !errors.Is(err, bridge.ErrUnroutable) {
		t.Errorf("mandatory publish to a closed inbox: err = %v, want ErrUnroutable", err)
	}
	for _, key := range []string{bridge.BroadcastAll, bridge.BroadcastKey(g)} {
		if err := h.publish(key, h.broadcast(key, key), false); err != nil {
			t.Fatalf("broadcast %s: %v", key, err)
		}
	}
	wantBodies(t, "closed inbox", h.consume(a, 10, true).exactly(3), "held before the close 0", "held before the close 1", "held before the close 2")
	deadline := time.Now().Add(h.f.Timeout)
	for {
		n, err := h.cur().CloseInbox(h.ctx(), a)
		if err != nil {
			t.Fatalf("CloseInbox again: %v", err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CloseInbox still counts %d after every message was acked", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n, err := h.cur().CloseInbox(h.ctx(), uuid.NewString()); err != nil || n != 0 {
		t.Errorf("CloseInbox of an inbox that does not exist: %d, %v; want 0, nil", n, err)
	}
}

// testSecondConsumer: one consumer of an inbox at a time. A second one is
// refused, or (SingleActive) receives nothing until the first is
// cancelled, and then everything after.
func testSecondConsumer(h *harness) {
	t := h.t
	gid := h.declare(bridge.InboxSpec{})
	first := h.consume(gid, 10, true)
	waiting, err := h.tryConsume(gid, 10, true)
	if h.f.SingleActive {
		if err != nil {
			t.Fatalf("second Consume of a single-active-consumer inbox: %v", err)
		}
	} else if !errors.Is(err, bridge.ErrConsumerExists) {
		t.Fatalf("second Consume: err = %v, want ErrConsumerExists", err)
	}
	h.mustPublish(gid, h.reply(gid, "to the first"))
	first.exactly(1)
	if waiting != nil {
		waiting.exactly(0)
	}
	first.cancel()
	first.cancel() // idempotent
	second := waiting
	if second == nil {
		second = h.consume(gid, 10, true)
	}
	h.mustPublish(gid, h.reply(gid, "to the second"))
	wantBodies(t, "second consumer", second.exactly(1), "to the second")
	if _, err := h.tryConsume(uuid.NewString(), 10, true); !errors.Is(err, bridge.ErrNoInbox) {
		t.Errorf("Consume of an undeclared inbox: err = %v, want ErrNoInbox", err)
	}
}

func testOrder(h *harness) {
	t := h.t
	gid := h.declare(bridge.InboxSpec{})
	ib := h.consume(gid, 16, true)
	const n = 100
	var want []string
	for i := range n {
		want = append(want, fmt.Sprint(i))
		h.mustPublish(gid, h.reply(gid, want[i]))
	}
	wantBodies(t, "order", ib.exactly(n), want...)
}

func testConcurrentPublishers(h *harness) {
	t := h.t
	const publishers, each = 8, 200
	gid := h.declare(bridge.InboxSpec{})
	ib := h.consume(gid, 64, true)
	envs := make([][]*bridge.Envelope, publishers)
	for p := range envs {
		for i := range each {
			envs[p] = append(envs[p], h.reply(gid, fmt.Sprintf("%d/%d", p, i)))
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, publishers+1)
	stop := make(chan struct{})
	var redeclare sync.WaitGroup
	redeclare.Go(func() { // a gateway re-declaring (same spec) meanwhile
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if err := h.cur().DeclareInbox(context.Background(), gid, bridge.InboxSpec{}); err != nil {
				errs <- fmt.Errorf("redeclare: %w", err)
				return
			}
		}
	})
	for p := range publishers {
		wg.Go(func() {
			for _, e := range envs[p] {
				if err := h.publish(gid, e, true); err != nil {
					errs <- fmt.Errorf("publisher %d: %w", p, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	redeclare.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := ib.exactly(publishers * each)
	seen := map[string]bool{}
	next := make([]int, publishers)
	for _, d := range got {
		if seen[d.Env.MsgID] {
			t.Fatalf("%q delivered twice", d.Env.Body)
		}
		seen[d.Env.MsgID] = true
		var p, i int
		if _, err := fmt.Sscanf(string(d.Env.Body), "%d/%d", &p, &i); err != nil || p < 0 || p >= publishers {
			t.Fatalf("unexpected body %q", d.Env.Body)
		}
		if i != next[p] {
			t.Fatalf("publisher %d: got message %d, want %d (one publisher's order must hold)", p, i, next[p])
		}
		next[p]++
	}
}

func testClosed(h *harness) {
	t := h.t
	tr := h.cur()
	gid := h.declare(bridge.InboxSpec{})
	if err := tr.DeleteInbox(h.ctx(), gid); err != nil {
		t.Fatalf("DeleteInbox: %v", err)
	}
	if err := tr.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := tr.Close(); err != nil {
		t.Errorf("second Close: %v, want nil", err)
	}
	ctx := h.ctx()
	if err := tr.Publish(ctx, gid, h.reply(gid, "x"), true); !errors.Is(err, bridge.ErrClosed) {
		t.Errorf("Publish after Close: %v, want ErrClosed", err)
	}
	if err := tr.DeclareInbox(ctx, gid, bridge.InboxSpec{}); !errors.Is(err, bridge.ErrClosed) {
		t.Errorf("DeclareInbox after Close: %v, want ErrClosed", err)
	}
	if err := tr.DeleteInbox(ctx, gid); !errors.Is(err, bridge.ErrClosed) {
		t.Errorf("DeleteInbox after Close: %v, want ErrClosed", err)
	}
	if _, err := tr.Consume(ctx, gid, 1, func(bridge.Delivery) {}); !errors.Is(err, bridge.ErrClosed) {
		t.Errorf("Consume after Close: %v, want ErrClosed", err)
	}
	if _, err := tr.ConsumeDeadLetters(ctx, func(bridge.DeadLetter) {}); !errors.Is(err, bridge.ErrClosed) {
		t.Errorf("ConsumeDeadLetters after Close: %v, want ErrClosed", err)
	}
}

// testReopen: what was published and not acked survives a restart, as do
// bindings and dead letters; what was acked does not come back.
func testReopen(h *harness) {
	t := h.t
	if h.f.Reopen == nil {
		t.Skip("Factory.Reopen is nil")
	}
	g := h.group()
	gid := h.declare(bridge.InboxSpec{Groups: []string{g}})
	poison := h.declare(bridge.InboxSpec{})
	for i := range 6 {
		h.mustPublish(gid, h.reply(gid, fmt.Sprint(i)))
	}
	bad := h.reply(poison, "rejected before the restart")
	h.mustPublish(poison, bad)
	ib := h.consume(gid, 4, false)
	got := ib.exactly(4)
	mustAck(t, got[0])
	mustAck(t, got[1])
	// "2", "3" delivered, unacked; "4", "5" never delivered
	pb := h.consume(poison, 1, false)
	if err := pb.exactly(1)[0].Acker.Reject("bad"); err != nil {
		t.Fatalf("Reject: %v", err)
	}

	h.reopen()
	ib = h.consume(gid, 10, false)
	got = ib.exactly(4)
	wantBodies(t, "after reopen", got, "2", "3", "4", "5")
	for _, d := range got[:2] {
		if !d.Redelivered {
			t.Errorf("%q was delivered before the reopen but is not marked Redelivered", d.Env.Body)
		}
	}
	key := bridge.BroadcastKey(g)
	if err := h.publish(key, h.broadcast(key, "bound after reopen"), true); err != nil {
		t.Fatalf("broadcast to a group bound before the reopen: %v", err)
	}
	got = ib.exactly(5)
	for _, d := range got {
		mustAck(t, d)
	}
	dead := h.deadLetters()
	if dl := dead.exactly(1)[0]; dl.MsgID != bad.MsgID || !strings.HasPrefix(dl.Reason, bridge.ReasonRejected) {
		t.Errorf("dead letter after reopen: %s/%q, want %s/rejected", dl.MsgID, dl.Reason, bad.MsgID)
	}

	h.reopen() // everything was acked: nothing comes back
	h.consume(gid, 10, false).exactly(0)
	h.consume(poison, 10, false).exactly(0)
}
