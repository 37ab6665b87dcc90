package transporttest

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
)

// The cases of the optional capabilities: presence heartbeats between
// gateways (bridge.PresenceTransport) and control messages to one host
// (bridge.ControlTransport). A transport without one skips its cases.

// hostID returns a fresh host id (a shared broker keeps control queues).
func (h *harness) hostID() string {
	return "ct-" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16]
}

func (h *harness) presence(tr bridge.Transport) bridge.PresenceTransport {
	h.t.Helper()
	pt, ok := tr.(bridge.PresenceTransport)
	if !ok {
		h.t.Skipf("%T does not implement bridge.PresenceTransport (a single-host transport)", tr)
	}
	return pt
}

func (h *harness) control(tr bridge.Transport) bridge.ControlTransport {
	h.t.Helper()
	ct, ok := tr.(bridge.ControlTransport)
	if !ok {
		h.t.Skipf("%T does not implement bridge.ControlTransport (a single-host transport)", tr)
	}
	return ct
}

// peer opens a second gateway's transport on the same broker or network.
func (h *harness) peer() bridge.Transport {
	h.t.Helper()
	if h.f.Peer == nil {
		h.t.Skip("Factory.Peer is nil: this case needs two gateways")
	}
	tr := h.f.Peer(h.t, h.cur())
	if tr == nil {
		h.t.Fatal("Factory.Peer returned nil")
	}
	h.mu.Lock()
	h.opened = append(h.opened, tr)
	h.mu.Unlock()
	return tr
}

// must is the consumer of a consume* call that must succeed.
func (h *harness) must(ib *inbox, err error) *inbox {
	h.t.Helper()
	if err != nil {
		h.t.Fatalf("attach a consumer: %v", err)
	}
	return ib
}

// heartbeat builds a presence heartbeat of host.
func (h *harness) heartbeat(host, name string) *bridge.Envelope {
	return h.envOf(host, bridge.KindPresence, "roster."+host+"."+name, `{"name":"`+name+`","host":"`+host+`"}`)
}

func (h *harness) consumePresence(tr bridge.Transport, host string, autoAck bool) (*inbox, error) {
	pt := h.presence(tr)
	return h.subscribe(rosterQueue(host), autoAck, func(f func(bridge.Delivery)) (bridge.Subscription, error) {
		return pt.ConsumePresence(context.Background(), host, f)
	})
}

func (h *harness) publishPresence(tr bridge.Transport, e *bridge.Envelope) {
	h.t.Helper()
	if err := h.presence(tr).PublishPresence(h.ctx(), e); err != nil {
		h.t.Fatalf("PublishPresence %s: %v", e.MsgID, err)
	}
}

func (h *harness) consumeControl(tr bridge.Transport, host string, autoAck bool) (*inbox, error) {
	ct := h.control(tr)
	return h.subscribe("control."+host, autoAck, func(f func(bridge.Delivery)) (bridge.Subscription, error) {
		return ct.ConsumeControl(context.Background(), host, f)
	})
}

// spawn builds a SPAWN for host and publishes it from tr.
func (h *harness) spawn(tr bridge.Transport, host, body string) *bridge.Envelope {
	h.t.Helper()
	e := h.env(bridge.KindSpawn, "control."+host, body)
	if err := h.control(tr).PublishControl(h.ctx(), host, e); err != nil {
		h.t.Fatalf("PublishControl to %s: %v", host, err)
	}
	return e
}

// rosterQueue is the name of host's roster queue in SPEC §5.
func rosterQueue(host string) string { return "roster." + host }

// testPresenceFanOut: a heartbeat reaches every gateway's roster queue,
// its publisher's own included, intact and with routing key roster.<host>.
func testPresenceFanOut(h *harness) {
	t := h.t
	a := h.cur()
	h.presence(a)
	b := h.peer()
	hostA, hostB := h.hostID(), h.hostID()
	ra := h.must(h.consumePresence(a, hostA, true))
	rb := h.must(h.consumePresence(b, hostB, true))
	beatA := h.heartbeat(hostA, "alpha")
	h.publishPresence(a, beatA)
	beatB := h.heartbeat(hostB, "beta")
	h.publishPresence(b, beatB)
	for _, ib := range []*inbox{ra, rb} {
		got := ib.exactly(2)
		byID := map[string]bridge.Delivery{got[0].Env.MsgID: got[0], got[1].Env.MsgID: got[1]}
		for _, want := range []*bridge.Envelope{beatA, beatB} {
			d, ok := byID[want.MsgID]
			if !ok {
				t.Fatalf("%s: heartbeat of %s missing", ib.gid, want.Host)
			}
			if diff := sameEnvelope(d.Env, want); diff != "" {
				t.Errorf("%s: heartbeat of %s: %s", ib.gid, want.Host, diff)
			}
			if d.Key != "roster."+want.Host {
				t.Errorf("%s: heartbeat of %s with routing key %q, want %q", ib.gid, want.Host, d.Key, "roster."+want.Host)
			}
		}
	}
}

// testPresenceExclusive: a second gateway with the same host id cannot
// attach its roster queue while the first holds it, and can once the
// first let go.
func testPresenceExclusive(h *harness) {
	t := h.t
	a := h.cur()
	h.presence(a)
	b := h.peer()
	host := h.hostID()
	first := h.must(h.consumePresence(a, host, true))
	if _, err := h.consumePresence(b, host, true); err == nil {
		t.Fatal("a second gateway attached the roster queue of a host id in use")
	}
	first.cancel()
	deadline := time.Now().Add(h.f.Timeout)
	for {
		_, err := h.consumePresence(b, host, true)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the first gateway let go: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testPresenceReject: a refused heartbeat is dead-lettered from the
// roster queue.
func testPresenceReject(h *harness) {
	t := h.t
	tr := h.cur()
	h.presence(tr)
	dead := h.deadLetters()
	host := h.hostID()
	ib := h.must(h.consumePresence(tr, host, false))
	beat := h.heartbeat(host, "forged")
	h.publishPresence(tr, beat)
	if err := ib.exactly(1)[0].Acker.Reject("bad signature"); err != nil {
		t.Fatalf("Reject: %v", err)
	}
	dl := dead.exactly(1)[0]
	if dl.MsgID != beat.MsgID || !strings.HasPrefix(dl.Reason, bridge.ReasonRejected) || dl.Queue != rosterQueue(host) {
		t.Errorf("dead letter %s/%q from %q, want %s/rejected from %q", dl.MsgID, dl.Reason, dl.Queue, beat.MsgID, rosterQueue(host))
	}
	if diff := sameEnvelope(dl.Env, beat); diff != "" {
		t.Errorf("dead-lettered heartbeat: %s", diff)
	}
}

// testControlRouting: a control message reaches that host's queue only,
// intact, with the host id as routing key; a host with no control queue
// is unroutable.
func testControlRouting(h *harness) {
	t := h.t
	a := h.cur()
	h.control(a)
	from := a
	if h.f.Peer != nil {
		from = h.peer() // from another gateway, as a remote spawn comes
	}
	hostB, hostC := h.hostID(), h.hostID()
	cb := h.must(h.consumeControl(a, hostB, true))
	cc := h.must(h.consumeControl(a, hostC, true))
	e := h.spawn(from, hostB, `{"profile":"reviewer"}`)
	d := cb.exactly(1)[0]
	if diff := sameEnvelope(d.Env, e); diff != "" {
		t.Errorf("control message: %s", diff)
	}
	if d.Key != hostB || d.Redelivered || d.Err != nil {
		t.Errorf("control delivery key %q redelivered %v err %v, want key %q, first delivery", d.Key, d.Redelivered, d.Err, hostB)
	}
	cc.exactly(0)
	nowhere := h.hostID()
	err := h.control(from).PublishControl(h.ctx(), nowhere, h.env(bridge.KindSpawn, "control."+nowhere, `{"profile":"x"}`))
	if !errors.Is(err, bridge.ErrUnroutable) {
		t.Errorf("control message to a host that never consumed: err = %v, want ErrUnroutable", err)
	}
}

// testControlRedeliver: control messages are manual-ack and durable: one
// left unacked when its consumer goes is delivered again, marked; one
// published while nobody consumes waits; an acked one does not come back.
func testControlRedeliver(h *harness) {
	t := h.t
	tr := h.cur()
	h.control(tr)
	host := h.hostID()
	first := h.must(h.consumeControl(tr, host, false))
	unacked := h.spawn(tr, host, `{"profile":"a"}`)
	first.exactly(1)
	first.cancel()
	waiting := h.spawn(tr, host, `{"profile":"b"}`)
	second := h.must(h.consumeControl(tr, host, false))
	got := second.exactly(2)
	if got[0].Env.MsgID != unacked.MsgID || !got[0].Redelivered {
		t.Errorf("first delivery after the consumer went: %s redelivered=%v, want %s redelivered", got[0].Env.MsgID, got[0].Redelivered, unacked.MsgID)
	}
	if got[1].Env.MsgID != waiting.MsgID || got[1].Redelivered {
		t.Errorf("second delivery: %s redelivered=%v, want %s, first delivery", got[1].Env.MsgID, got[1].Redelivered, waiting.MsgID)
	}
	for _, d := range got {
		mustAck(t, d)
	}
	second.cancel()
	h.must(h.consumeControl(tr, host, false)).exactly(0)
}

// testControlExclusive: one consumer per control queue (one gateway per
// host id).
func testControlExclusive(h *harness) {
	tr := h.cur()
	h.control(tr)
	host := h.hostID()
	first := h.must(h.consumeControl(tr, host, true))
	second, err := h.consumeControl(tr, host, true)
	if !h.f.SingleActive {
		if !errors.Is(err, bridge.ErrConsumerExists) {
			h.t.Fatalf("second ConsumeControl: err = %v, want ErrConsumerExists", err)
		}
		return
	}
	if err != nil {
		h.t.Fatalf("second ConsumeControl of a single-active-consumer queue: %v", err)
	}
	h.spawn(tr, host, `{"profile":"a"}`)
	first.exactly(1)
	second.exactly(0)
	first.cancel()
	h.spawn(tr, host, `{"profile":"b"}`)
	second.exactly(1)
}

// testControlReject: a refused control message is dead-lettered.
func testControlReject(h *harness) {
	t := h.t
	tr := h.cur()
	h.control(tr)
	dead := h.deadLetters()
	host := h.hostID()
	ib := h.must(h.consumeControl(tr, host, false))
	e := h.spawn(tr, host, `{"profile":"a"}`)
	if err := ib.exactly(1)[0].Acker.Reject("replayed"); err != nil {
		t.Fatalf("Reject: %v", err)
	}
	dl := dead.exactly(1)[0]
	if dl.MsgID != e.MsgID || !strings.HasPrefix(dl.Reason, bridge.ReasonRejected) || dl.Queue != h.f.controlQueue(host) {
		t.Errorf("dead letter %s/%q from %q, want %s/rejected from %q", dl.MsgID, dl.Reason, dl.Queue, e.MsgID, h.f.controlQueue(host))
	}
	ib.cancel()
	h.must(h.consumeControl(tr, host, false)).exactly(0)
}
