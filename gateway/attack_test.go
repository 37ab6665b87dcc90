package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker"
	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/keys"
)

// TestAttackerOnBroker: someone with broker access publishes straight to
// the broker with a raw AMQP client, 100 messages per attack, while host B's
// worker keeps replying to host A's primary. Every attack message must be
// refused by host A with the right reason (counted), dead-lettered, and
// reach no entity; the legitimate traffic must lose nothing.
//
// The attacker has: broker access (it can bind a spy queue and so capture
// real signed messages), its own keys (one trusted nowhere), and — for the
// checks that come after the signature — the key of "evil", a host A trusts
// (a compromised peer): what evil signs must still not pass as another
// host's entity, nor expired, nor from the future.
func TestAttackerOnBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("1300 attack messages")
	}
	url := brokerURL(t)
	const n = 100
	evilHost, evilDir := gatewaytest.UniqueHost("evil"), gatewaytest.TempDir(t)
	gatewaytest.JoinTrustMesh(t, evilDir, evilHost) // trusted by the gateways below
	evil, err := keys.Load(evilDir + "/" + keys.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	stranger, _, err := keys.LoadOrCreate(gatewaytest.TempDir(t), "stranger") // trusted by nobody
	if err != nil {
		t.Fatal(err)
	}
	// 100 MiB of oversized bodies go through the broker: heartbeats may lag
	// far behind the tests' usual 900 ms presence TTL (production: 15 s)
	lenient := func(c *gateway.Config) { c.Core.PresenceTTL = 10 * time.Second }
	ga := gatewaytest.StartHost(t, gatewaytest.UniqueHost("ta"), brokerURL(t), lenient)
	gb := gatewaytest.StartHost(t, gatewaytest.UniqueHost("tb"), brokerURL(t), lenient)
	ctx := context.Background()
	lead := gatewaytest.RegisterOn(t, ga, "lead", bridge.RolePrimary)
	other := gatewaytest.RegisterOn(t, ga, "other", bridge.RolePrimary)
	w := gatewaytest.RegisterOn(t, gb, "w", bridge.RoleWorker)
	target := "lead@" + ga.Host()
	gatewaytest.Eventually(t, 10*time.Second, "B sees lead, A sees w", func() bool {
		_, e1 := gb.Core().Resolve(target)
		_, e2 := ga.Core().Resolve("w@" + gb.Host())
		return e1 == nil && e2 == nil
	})

	ch := rawChannel(t, url)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	pub := func(exchange, key string, h amqp.Table, body []byte) {
		t.Helper()
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, false, false, amqp.Publishing{Headers: h, Body: body, DeliveryMode: amqp.Persistent})
		if err != nil {
			t.Fatal(err)
		}
		if !dc.Wait() {
			t.Fatal("broker nacked an attack publish")
		}
	}

	// the spy: a queue of the attacker's own on lead's routing key captures
	// real signed messages from w
	spy, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(spy.Name, lead.GID, broker.ExchangeMsg, false, nil); err != nil {
		t.Fatal(err)
	}
	rspy, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(rspy.Name, "roster."+gb.Host(), broker.ExchangeRoster, false, nil); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if _, err := gb.Core().Send(ctx, w.GID, bridge.SendRequest{Target: target, Message: fmt.Sprintf("capture-%03d", i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	drained := 0
	for drained < n {
		r, err := ga.Core().Poll(ctx, lead.GID, bridge.PollRequest{Max: 500, Wait: 5 * time.Second}, nil)
		if err != nil || len(r.Messages) == 0 {
			t.Fatalf("drain of the captured ones: %d of %d (%v)", drained, n, err)
		}
		drained += len(r.Messages)
	}
	var captured []amqp.Delivery
	for len(captured) < n {
		d, ok, err := ch.Get(spy.Name, true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		captured = append(captured, d)
	}

	var beat amqp.Delivery // one of w's heartbeats, A has seen it or a newer one
	for beat.Body == nil {
		d, ok, err := ch.Get(rspy.Name, true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if d.Headers[bridge.HdrFrom] == w.GID {
			beat = d
		}
	}
	time.Sleep(3 * ga.Core().Config().PresenceEvery) // A has a newer heartbeat of w by now

	// legitimate traffic during the whole attack
	var legitSent, legitFailed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := gb.Core().Send(ctx, w.GID, bridge.SendRequest{Target: target, Message: fmt.Sprintf("legit-%05d", i)}, nil); err != nil {
				legitFailed.Add(1)
				t.Errorf("legit send: %v", err)
				continue
			}
			legitSent.Add(1)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	legitGot := map[string]int{}
	var attackGot []string
	var pollMu sync.Mutex
	pollOnce := func(gid string, wait time.Duration) int {
		r, err := ga.Core().Poll(ctx, gid, bridge.PollRequest{Max: 500, Wait: wait}, nil)
		if err != nil {
			t.Errorf("poll: %v", err)
			return 0
		}
		pollMu.Lock()
		defer pollMu.Unlock()
		for _, m := range r.Messages {
			if strings.HasPrefix(m.Body, "legit-") && m.From == w.GID {
				legitGot[m.Body]++
			} else {
				attackGot = append(attackGot, fmt.Sprintf("%s %s from %s: %.40q", gid, m.Kind, m.From, m.Body))
			}
		}
		return len(r.Messages)
	}
	wg.Add(1)
	go func() { // lead keeps draining, as a primary would
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			pollOnce(lead.GID, 200*time.Millisecond)
			pollOnce(other.GID, 0)
		}
	}()

	// attack envelopes
	fresh := func(host, from string) *bridge.Envelope {
		now := time.Now()
		return &bridge.Envelope{V: bridge.Version, Kind: bridge.KindReply, MsgID: uuid.NewString(), From: from, To: lead.GID,
			Host: host, TS: now, ExpiresAt: now.Add(time.Hour), Body: []byte("attack: " + uuid.NewString())}
	}
	signed := func(e *bridge.Envelope, k *keys.HostKey) amqp.Table {
		e.Sig = k.Sign(e.SigningInput())
		return amqp.Table(e.Headers())
	}
	evilGW := bridge.GatewayGID(evilHost)
	cases := []struct {
		name, reason string
		send         func(i int)
	}{
		// first, while the captured heartbeat is still within its TTL
		{"a captured heartbeat of B's worker, replayed", bridge.RefuseReplayed, func(i int) {
			pub(broker.ExchangeRoster, "roster."+gb.Host(), beat.Headers, beat.Body)
		}},
		{"tampered body", bridge.RefuseBadSignature, func(i int) {
			d := captured[i]
			pub(broker.ExchangeMsg, lead.GID, d.Headers, append([]byte("attack: "), d.Body...))
		}},
		{"tampered signed header", bridge.RefuseBadSignature, func(i int) {
			h := maps.Clone(captured[i].Headers)
			h[bridge.HdrTraceID] = uuid.NewString()
			pub(broker.ExchangeMsg, lead.GID, h, captured[i].Body)
		}},
		{"signed by an untrusted key, claiming host B", bridge.RefuseBadSignature, func(i int) {
			e := fresh(gb.Host(), w.GID)
			pub(broker.ExchangeMsg, lead.GID, signed(e, stranger), e.Body)
		}},
		{"unknown host", bridge.RefuseUnknownHost, func(i int) {
			e := fresh("nowhere-"+fmt.Sprint(i), uuid.NewString())
			pub(broker.ExchangeMsg, lead.GID, signed(e, stranger), e.Body)
		}},
		{"from not on the signing host (evil signs as B's worker)", bridge.RefuseFromNotOnHost, func(i int) {
			e := fresh(evilHost, w.GID)
			pub(broker.ExchangeMsg, lead.GID, signed(e, evil), e.Body)
		}},
		{"to differs from the routing key (captured, rerouted to another inbox)", bridge.RefuseToMismatch, func(i int) {
			pub(broker.ExchangeMsg, other.GID, captured[i].Headers, captured[i].Body)
		}},
		{"replayed msgId (captured, replayed as is)", bridge.RefuseReplayed, func(i int) {
			pub(broker.ExchangeMsg, lead.GID, captured[i].Headers, captured[i].Body)
		}},
		{"expired", bridge.RefuseExpired, func(i int) {
			e := fresh(evilHost, evilGW)
			e.Kind, e.Corr = bridge.KindFailed, uuid.NewString() // what a gateway may send as itself
			e.TS, e.ExpiresAt = time.Now().Add(-time.Hour), time.Now().Add(-10*time.Minute)
			pub(broker.ExchangeMsg, lead.GID, signed(e, evil), e.Body)
		}},
		{"ts too far in the future", bridge.RefuseFuture, func(i int) {
			e := fresh(evilHost, evilGW)
			e.Kind, e.Corr = bridge.KindFailed, uuid.NewString()
			e.TS, e.ExpiresAt = time.Now().Add(time.Hour), time.Now().Add(2*time.Hour)
			pub(broker.ExchangeMsg, lead.GID, signed(e, evil), e.Body)
		}},
		{"oversized body", bridge.RefuseOversized, func(i int) {
			e := fresh(evilHost, evilGW)
			e.Body = []byte(strings.Repeat("a", bridge.MaxBodyBytes+1))
			pub(broker.ExchangeMsg, lead.GID, signed(e, evil), e.Body)
		}},
		{"malformed or missing headers", bridge.RefuseMalformed, func(i int) {
			e := fresh(evilHost, evilGW)
			h := signed(e, evil)
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
			pub(broker.ExchangeMsg, lead.GID, h, e.Body)
		}},
		{"unsupported v", bridge.RefuseVersion, func(i int) {
			e := fresh(evilHost, evilGW)
			e.V = 2
			pub(broker.ExchangeMsg, lead.GID, signed(e, evil), e.Body)
		}},
		{"a REPLY as evil's gateway itself (gateways send only FAILED)", bridge.RefuseFromNotOnHost, func(i int) {
			e := fresh(evilHost, evilGW)
			pub(broker.ExchangeMsg, lead.GID, signed(e, evil), e.Body)
		}},
		{"presence claiming B's worker, signed by evil (trusted)", bridge.RefuseFromNotOnHost, func(i int) {
			now := time.Now()
			body := fmt.Sprintf(`{"gid":%q,"name":"w","host":%q,"role":"worker"}`, w.GID, evilHost)
			e := &bridge.Envelope{V: bridge.Version, Kind: bridge.KindPresence, MsgID: uuid.NewString(), From: w.GID, To: "roster." + evilHost + ".w",
				Host: evilHost, TS: now, ExpiresAt: now.Add(time.Minute), Body: []byte(body)}
			pub(broker.ExchangeRoster, "roster."+evilHost, signed(e, evil), e.Body)
		}},
		{"presence for B's host signed by an untrusted key", bridge.RefuseBadSignature, func(i int) {
			now := time.Now()
			body := fmt.Sprintf(`{"gid":%q,"name":"impostor%d","host":%q,"role":"worker"}`, uuid.NewString(), i, gb.Host())
			e := &bridge.Envelope{V: bridge.Version, Kind: bridge.KindPresence, MsgID: uuid.NewString(), To: "roster." + gb.Host() + ".impostor",
				Host: gb.Host(), TS: now, ExpiresAt: now.Add(time.Minute), Body: []byte(body)}
			pub(broker.ExchangeRoster, "roster."+gb.Host(), signed(e, stranger), e.Body)
		}},
	}
	bBefore := gb.Core().Refused()
	for ci, c := range cases {
		caseStart := time.Now()
		before := ga.Core().Refused()
		for i := 0; i < n; i++ {
			c.send(i)
		}
		var delta map[string]uint64
		diff := func() map[string]uint64 {
			d := map[string]uint64{}
			for k, v := range ga.Core().Refused() {
				if v != before[k] {
					d[k] = v - before[k]
				}
			}
			return d
		}
		deadline := time.Now().Add(30 * time.Second)
		for delta = diff(); delta[c.reason] < n && time.Now().Before(deadline); delta = diff() {
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("attack %2d %-64s %d sent, refused %v in %v", ci+1, c.name, n, delta, time.Since(caseStart).Round(time.Millisecond))
		if delta[c.reason] != n || len(delta) != 1 {
			t.Errorf("%s: refusals %v, want exactly %d %s", c.name, delta, n, c.reason)
		}
	}
	// forged dead letters: captured signed replies (and the same with the
	// signature stripped) published straight to bridge.dlx, claiming a
	// broker TTL expiry — no gateway may answer them with a FAILED
	for i := 0; i < n; i++ {
		h := maps.Clone(captured[i].Headers)
		h["x-first-death-reason"] = "expired"
		if i%2 == 1 {
			delete(h, bridge.HdrSig)
		}
		pub(broker.ExchangeDLX, "", h, captured[i].Body)
	}
	gatewaytest.Eventually(t, 30*time.Second, "the forged dead letters consumed", func() bool {
		got := 0
		for _, g := range []*gateway.Gateway{ga, gb} {
			dl, _ := g.Core().DeadLetters(100000)
			for _, r := range dl {
				if r.Reason == bridge.ReasonExpired && r.From == w.GID {
					got++
					if r.Reported {
						t.Fatalf("a forged dead letter was reported to its sender: %+v", r)
					}
				}
			}
		}
		return got >= n
	})
	if r, _ := gb.Core().Poll(ctx, w.GID, bridge.PollRequest{Max: 500}, nil); len(r.Messages) != 0 {
		t.Errorf("w got %d messages from forged dead letters, e.g. %+v", len(r.Messages), r.Messages[0])
	}
	t.Logf("%d forged dead letters: 0 FAILEDs sent", n)

	close(stop)
	wg.Wait()
	// whatever legit replies are still in flight
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		pollMu.Lock()
		got := len(legitGot)
		pollMu.Unlock()
		if int64(got) >= legitSent.Load() {
			break
		}
		pollOnce(lead.GID, time.Second)
	}
	lost, dups := 0, 0
	for i := 0; i < int(legitSent.Load()); i++ {
		switch legitGot[fmt.Sprintf("legit-%05d", i)] {
		case 0:
			lost++
		case 1:
		default:
			dups++
		}
	}
	// every attack message was dead-lettered: the gateways' DLQ consumers
	// logged them (whichever took each). Forged presence reaches every
	// gateway's roster queue, so both A and B refused a copy of each.
	// forged presence reaches every gateway's roster queue: B refuses its
	// copies too (the untrusted key; w is its own entity)
	bRefused := uint64(0)
	for k, v := range gb.Core().Refused() {
		bRefused += v - bBefore[k]
	}
	wantDead := n*len(cases) + int(bRefused)
	attackDead := 0
	// (the broker may carry other gateways' dead letters too: count ours —
	// what left lead's and other's inboxes, and the forged presence)
	attackQueues := map[string]bool{bridge.InboxQueueName(lead.GID): true, bridge.InboxQueueName(other.GID): true,
		broker.RosterQueue(ga.Host()): true, broker.RosterQueue(gb.Host()): true}
	gatewaytest.Eventually(t, 30*time.Second, "every refused message in the dead-letter logs", func() bool {
		attackDead = 0
		for _, g := range []*gateway.Gateway{ga, gb} {
			dl, err := g.Core().DeadLetters(100000)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range dl {
				if !attackQueues[r.Queue] || !strings.HasPrefix(r.Reason, bridge.ReasonRejected) {
					continue
				}
				if strings.HasPrefix(r.Queue, "roster.") && !strings.HasPrefix(r.To, "roster."+gb.Host()+".impostor") &&
					r.To != "roster."+evilHost+".w" && r.MsgID != beat.MessageId {
					continue // a heartbeat of a host not trusted here, not this attack
				}
				attackDead++
			}
		}
		return attackDead >= wantDead
	})
	t.Logf("attack over: %d attack messages, %d delivered to an entity, %d dead-lettered; legit traffic: %d sent, %d failed, %d received, %d lost, %d duplicated",
		n*len(cases), len(attackGot), attackDead, legitSent.Load(), legitFailed.Load(), len(legitGot), lost, dups)
	if len(attackGot) != 0 {
		t.Errorf("attack messages reached entities: %q", attackGot[:min(5, len(attackGot))])
	}
	if lost != 0 || dups != 0 || legitFailed.Load() != 0 || legitSent.Load() == 0 {
		t.Errorf("legit traffic: %d sent, %d failed, %d lost, %d duplicated", legitSent.Load(), legitFailed.Load(), lost, dups)
	}
	if attackDead != wantDead {
		t.Errorf("%d dead-lettered, want %d", attackDead, wantDead)
	}

	// `herdbridge stats` shows the counters; the audit log has a line per
	// refusal, with metadata only: no body of any message
	// (the admin socket's stats op, which `herdbridge stats --json` prints:
	// cmd/herdbridge's TestStatsCommand)
	r, err := gateway.Ask(ga.StateDir(), gateway.Request{Op: "stats"})
	if err != nil || r.Stats == nil {
		t.Fatalf("stats: %v %+v", err, r)
	}
	st := *r.Stats
	if !st.Signing || st.Refused[bridge.RefuseBadSignature] < 3*n || st.Refused[bridge.RefuseReplayed] != 2*n {
		t.Errorf("stats: %+v", st)
	}
	ga.Close() // flushes the audit log
	audit, err := os.ReadFile(st.Audit)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(audit)), "\n")
	verdicts := map[string]int{}
	for _, l := range lines {
		var r bridge.AuditRecord
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("audit line %q: %v", l, err)
		}
		verdicts[r.Verdict]++
	}
	for _, secret := range []string{"attack: ", "legit-", "capture-"} {
		if bytes.Contains(audit, []byte(secret)) {
			t.Errorf("the audit log holds a message body (%q)", secret)
		}
	}
	t.Logf("audit log of host A: %d lines, verdicts %v", len(lines), verdicts)
	if verdicts["refused: "+bridge.RefuseToMismatch] != n || verdicts["accepted"] < n {
		t.Errorf("audit verdicts %v", verdicts)
	}
}

// TestNoPresenceRace: a message sent right after its sender registered is
// not refused for a missing presence. 50 workers on host B each register and
// reply at once; and a message whose sender's signed heartbeat comes only
// after it waits for it, while one whose heartbeat never comes is refused
// once PresenceWait is over.
func TestNoPresenceRace(t *testing.T) {
	brokerURL(t)
	evilHost, evilDir := gatewaytest.UniqueHost("late"), gatewaytest.TempDir(t)
	gatewaytest.JoinTrustMesh(t, evilDir, evilHost)
	lateKey, err := keys.Load(evilDir + "/" + keys.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	ga := gatewaytest.StartHost(t, gatewaytest.UniqueHost("ra"), brokerURL(t))
	gb := gatewaytest.StartHost(t, gatewaytest.UniqueHost("rb"), brokerURL(t))
	ctx := context.Background()
	lead := gatewaytest.RegisterOn(t, ga, "lead", bridge.RolePrimary)
	target := "lead@" + ga.Host()
	gatewaytest.Eventually(t, 10*time.Second, "B sees lead", func() bool { _, err := gb.Core().Resolve(target); return err == nil })
	gatewaytest.Eventually(t, 10*time.Second, "A trusts and sees host B", func() bool { // trust before traffic
		for _, h := range ga.Core().Roster().Hosts {
			if h.Host == gb.Host() {
				return true
			}
		}
		return false
	})
	const workers = 50
	for i := 0; i < workers; i++ {
		w, _, err := gb.Core().Register(ctx, bridge.RegisterRequest{Name: fmt.Sprintf("w%02d", i), Role: bridge.RoleWorker})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := gb.Core().Send(ctx, w.GID, bridge.SendRequest{Target: target, Message: fmt.Sprintf("first words %02d", i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	for deadline := time.Now().Add(20 * time.Second); got < workers && time.Now().Before(deadline); {
		r, err := ga.Core().Poll(ctx, lead.GID, bridge.PollRequest{Max: 100, Wait: time.Second}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got += len(r.Messages)
	}
	t.Logf("%d workers registered and replied at once: %d replies arrived, refusals %v", workers, got, ga.Core().Refused())
	if got != workers || ga.Core().Refused()[bridge.RefuseFromNotOnHost] != 0 {
		t.Fatalf("%d of %d arrived; refusals %v", got, workers, ga.Core().Refused())
	}

	// a heartbeat that comes after the message: the message waits for it
	ch := rawChannel(t, brokerURL(t))
	publish := func(exchange, key string, e *bridge.Envelope) {
		e.Sig = lateKey.Sign(e.SigningInput())
		if err := ch.PublishWithContext(ctx, exchange, key, false, false, amqp.Publishing{Headers: amqp.Table(e.Headers()), Body: e.Body}); err != nil {
			t.Fatal(err)
		}
	}
	msg := func(from, body string) *bridge.Envelope {
		now := time.Now()
		return &bridge.Envelope{V: bridge.Version, Kind: bridge.KindReply, MsgID: uuid.NewString(), From: from, To: lead.GID, Host: evilHost, TS: now, ExpiresAt: now.Add(time.Hour), Body: []byte(body)}
	}
	slow, never := uuid.NewString(), uuid.NewString()
	publish(broker.ExchangeMsg, lead.GID, msg(slow, "before my heartbeat"))
	publish(broker.ExchangeMsg, lead.GID, msg(never, "no heartbeat ever"))
	time.Sleep(ga.Core().Config().PresenceTTL / 3)
	if r, _ := ga.Core().Poll(ctx, lead.GID, bridge.PollRequest{}, nil); len(r.Messages) != 0 {
		t.Fatalf("delivered before its sender's presence: %+v", r.Messages)
	}
	now := time.Now()
	publish(broker.ExchangeRoster, "roster."+evilHost, &bridge.Envelope{V: bridge.Version, Kind: bridge.KindPresence, MsgID: uuid.NewString(), From: slow,
		To: "roster." + evilHost + ".slow", Host: evilHost, TS: now, ExpiresAt: now.Add(time.Minute),
		Body: fmt.Appendf(nil, `{"gid":%q,"name":"slow","host":%q,"role":"worker"}`, slow, evilHost)})
	r, err := ga.Core().Poll(ctx, lead.GID, bridge.PollRequest{Wait: 5 * time.Second}, nil)
	if err != nil || len(r.Messages) != 1 || r.Messages[0].Body != "before my heartbeat" {
		t.Fatalf("after the heartbeat: %+v %v", r.Messages, err)
	}
	gatewaytest.Eventually(t, 10*time.Second, "the message with no heartbeat refused", func() bool {
		return ga.Core().Refused()[bridge.RefuseFromNotOnHost] == 1
	})
	t.Logf("late heartbeat: its message waited and was delivered; no heartbeat: refused after %v (%v)", ga.Core().Config().PresenceWait, ga.Core().Refused())
}

// TestPresenceWaitIsBounded: messages from senders with no presence yet
// wait for it, but at most half the prefetch window per inbox (here 32 of 64):
// a flood of them — even signed by a trusted host — is refused past that,
// and cannot wedge the inbox; what waited is refused at PresenceWait.
func TestPresenceWaitIsBounded(t *testing.T) {
	brokerURL(t)
	const n = 100
	evilHost, evilDir := gatewaytest.UniqueHost("flood"), gatewaytest.TempDir(t)
	gatewaytest.JoinTrustMesh(t, evilDir, evilHost)
	evil, err := keys.Load(evilDir + "/" + keys.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	ga := gatewaytest.StartHost(t, gatewaytest.UniqueHost("pa"), brokerURL(t), func(c *gateway.Config) { c.Core.Prefetch = 64; c.Core.PresenceWait = 3 * time.Second })
	gb := gatewaytest.StartHost(t, gatewaytest.UniqueHost("pb"), brokerURL(t))
	ctx := context.Background()
	lead := gatewaytest.RegisterOn(t, ga, "lead", bridge.RolePrimary)
	w := gatewaytest.RegisterOn(t, gb, "w", bridge.RoleWorker)
	target := "lead@" + ga.Host()
	gatewaytest.Eventually(t, 10*time.Second, "each sees the other", func() bool {
		_, e1 := gb.Core().Resolve(target)
		_, e2 := ga.Core().Resolve("w@" + gb.Host())
		return e1 == nil && e2 == nil
	})
	ch := rawChannel(t, brokerURL(t))
	for i := 0; i < n; i++ {
		now := time.Now()
		e := &bridge.Envelope{V: bridge.Version, Kind: bridge.KindReply, MsgID: uuid.NewString(), From: uuid.NewString(), To: lead.GID,
			Host: evilHost, TS: now, ExpiresAt: now.Add(time.Hour), Body: []byte("from nobody known")}
		e.Sig = evil.Sign(e.SigningInput())
		if err := ch.PublishWithContext(ctx, broker.ExchangeMsg, lead.GID, false, false, amqp.Publishing{Headers: amqp.Table(e.Headers()), Body: e.Body}); err != nil {
			t.Fatal(err)
		}
	}
	gatewaytest.Eventually(t, 10*time.Second, "all but 32 refused at once", func() bool {
		return ga.Core().Refused()[bridge.RefuseFromNotOnHost] == n-32
	})
	start := time.Now()
	if _, err := gb.Core().Send(ctx, w.GID, bridge.SendRequest{Target: target, Message: "legit, behind the flood"}, nil); err != nil {
		t.Fatal(err)
	}
	r, err := ga.Core().Poll(ctx, lead.GID, bridge.PollRequest{Wait: 2 * time.Second}, nil)
	if err != nil || len(r.Messages) != 1 || r.Messages[0].Body != "legit, behind the flood" {
		t.Fatalf("legit reply while 32 wait for presence: %+v %v", r.Messages, err)
	}
	took := time.Since(start)
	gatewaytest.Eventually(t, 10*time.Second, "the 32 refused at PresenceWait", func() bool {
		return ga.Core().Refused()[bridge.RefuseFromNotOnHost] == n
	})
	t.Logf("%d messages from unknown senders: %d refused at once, 32 waited %v and were refused; a legit reply meanwhile took %v",
		n, n-32, ga.Core().Config().PresenceWait, took.Round(time.Millisecond))
}

// TestBacklogOutlivesSender: replies wait in a primary's inbox while its
// gateway is down; meanwhile their sender is removed on its host. The
// restarted gateway still knows (from its stored bindings) that the sender
// lived there, and delivers them.
func TestBacklogOutlivesSender(t *testing.T) {
	url := brokerURL(t)
	const n = 10
	hostA, dirA := gatewaytest.UniqueHost("oa"), gatewaytest.TempDir(t)
	at := func(c *gateway.Config) { c.StateDir = dirA; c.Core.PresenceWait = time.Second }
	ga := gatewaytest.StartHost(t, hostA, url, at)
	gb := gatewaytest.StartHost(t, gatewaytest.UniqueHost("ob"), brokerURL(t), func(c *gateway.Config) { c.Core.PresenceTTL = 30 * time.Second })
	ctx := context.Background()
	lead := gatewaytest.RegisterOn(t, ga, "lead", bridge.RolePrimary)
	w := gatewaytest.RegisterOn(t, gb, "w", bridge.RoleWorker)
	target := "lead@" + hostA
	gatewaytest.Eventually(t, 10*time.Second, "each sees the other", func() bool {
		_, e1 := gb.Core().Resolve(target)
		_, e2 := ga.Core().Resolve("w@" + gb.Host())
		return e1 == nil && e2 == nil
	})
	ga.Close()
	for i := 0; i < n; i++ {
		if _, err := gb.Core().Send(ctx, w.GID, bridge.SendRequest{Target: target, Message: fmt.Sprintf("last words %d", i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := gb.Core().Remove(ctx, w.GID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // w's presence is long gone
	ga = gatewaytest.StartHost(t, hostA, url, at)
	got := 0
	for deadline := time.Now().Add(10 * time.Second); got < n && time.Now().Before(deadline); {
		r, err := ga.Core().Poll(ctx, lead.GID, bridge.PollRequest{Max: 100, Wait: time.Second}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got += len(r.Messages)
	}
	t.Logf("%d replies queued while the primary's gateway was down, sender removed meanwhile: %d delivered after restart, refusals %v", n, got, ga.Core().Refused())
	if got != n {
		t.Fatalf("%d of %d delivered", got, n)
	}
}

// rawChannel is a raw amqp091 channel on url, closed with the test.
func rawChannel(t testing.TB, url string) *amqp.Channel {
	t.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}
