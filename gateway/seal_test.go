package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
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

// spy is an attacker's raw AMQP view of the broker: one queue bound to
// every routing key of the message exchange (topic "#"), to both hosts'
// control queues, and to the dead-letter exchange.
type spy struct {
	ch   *amqp.Channel
	name string
}

func newSpy(t *testing.T, url string, hosts ...string) *spy {
	ch := rawChannel(t, url)
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	binds := [][2]string{{broker.ExchangeMsg, "#"}, {broker.ExchangeDLX, ""}}
	for _, h := range hosts {
		binds = append(binds, [2]string{broker.ExchangeControl, h})
	}
	for _, b := range binds {
		if err := ch.QueueBind(q.Name, b[1], b[0], false, nil); err != nil {
			t.Fatal(err)
		}
	}
	return &spy{ch: ch, name: q.Name}
}

// drain takes what the spy queue holds now.
func (s *spy) drain(t *testing.T) []amqp.Delivery {
	var out []amqp.Delivery
	for {
		d, ok, err := s.ch.Get(s.name, true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		out = append(out, d)
	}
}

// leaks returns the deliveries whose body or headers hold tag.
func leaks(ds []amqp.Delivery, tag string) []string {
	var out []string
	for _, d := range ds {
		if bytes.Contains(d.Body, []byte(tag)) || strings.Contains(fmt.Sprint(d.Headers), tag) {
			out = append(out, fmt.Sprintf("%v %v", d.Headers[bridge.HdrKind], d.Headers[bridge.HdrMsgID]))
		}
	}
	return out
}

func pollFor(t *testing.T, g *gateway.Gateway, gid string, want int) []bridge.Message {
	t.Helper()
	var got []bridge.Message
	for deadline := time.Now().Add(20 * time.Second); len(got) < want && time.Now().Before(deadline); {
		r, err := g.Core().Poll(context.Background(), gid, bridge.PollRequest{Max: 500, Wait: time.Second}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r.Messages...)
	}
	if len(got) < want {
		t.Fatalf("polled %d of %d", len(got), want)
	}
	return got
}

func sealPair(t *testing.T, tune ...func(*gateway.Config)) (ga, gb *gateway.Gateway, lead, w bridge.Entity) {
	url := brokerURL(t)
	slow := func(c *gateway.Config) { c.Core.PresenceTTL = 10 * time.Second }
	ga = gatewaytest.StartHost(t, gatewaytest.UniqueHost("sa"), url, append([]func(*gateway.Config){slow}, tune...)...)
	gb = gatewaytest.StartHost(t, gatewaytest.UniqueHost("sb"), url, append([]func(*gateway.Config){slow}, tune...)...)
	lead = gatewaytest.RegisterOn(t, ga, "lead", bridge.RolePrimary)
	w = gatewaytest.RegisterOn(t, gb, "w", bridge.RoleWorker)
	gatewaytest.Eventually(t, 10*time.Second, "each sees the other and its HPKE key", func() bool {
		_, e1 := ga.Core().Resolve("w@" + gb.Host())
		_, e2 := gb.Core().Resolve("lead@" + ga.Host())
		return e1 == nil && e2 == nil && sealState(ga, gb.Host()) == bridge.SealStateSealed && sealState(gb, ga.Host()) == bridge.SealStateSealed
	})
	return ga, gb, lead, w
}

func sealState(g *gateway.Gateway, host string) string {
	for _, h := range g.Core().Roster().Hosts {
		if h.Host == host {
			return h.Seal
		}
	}
	return ""
}

// TestSealedOnBroker: with sealing on (the default), an attacker reading
// every message, control message and dead letter on the broker with raw
// AMQP finds none of the uniquely tagged bodies of a brief, a reply, a
// question and its answer; the recipients read them all; neither audit
// log holds them. A captured sealed brief with any ciphertext byte
// changed is refused (bad signature) and dead-lettered, and one replayed
// as is is refused as a replay.
func TestSealedOnBroker(t *testing.T) {
	ga, gb, lead, w := sealPair(t)
	sp := newSpy(t, brokerURL(t), ga.Host(), gb.Host())
	ctx := context.Background()
	tag := "SEALTAG" + strings.ReplaceAll(uuid.NewString(), "-", "")
	if _, err := ga.Core().Send(ctx, lead.GID, bridge.SendRequest{Target: "w@" + gb.Host(), Message: tag + "-brief"}, nil); err != nil {
		t.Fatal(err)
	}
	if m := pollFor(t, gb, w.GID, 1); m[0].Body != tag+"-brief" {
		t.Fatalf("worker read %q", m[0].Body)
	}
	if _, err := gb.Core().Send(ctx, w.GID, bridge.SendRequest{Target: "lead@" + ga.Host(), Message: tag + "-reply"}, nil); err != nil {
		t.Fatal(err)
	}
	if m := pollFor(t, ga, lead.GID, 1); m[0].Body != tag+"-reply" {
		t.Fatalf("lead read %q", m[0].Body)
	}
	var wg sync.WaitGroup
	var asked *bridge.Result
	wg.Add(1)
	go func() {
		defer wg.Done()
		var err error
		if asked, err = gb.Core().Ask(ctx, w.GID, bridge.AskRequest{Question: tag + "-question", Target: "lead@" + ga.Host(), Wait: 15 * time.Second}, nil); err != nil {
			t.Error(err)
		}
	}()
	q := pollFor(t, ga, lead.GID, 1)
	if q[0].Body != tag+"-question" || q[0].TurnID == "" {
		t.Fatalf("lead read %+v", q[0])
	}
	if _, err := ga.Core().Send(ctx, lead.GID, bridge.SendRequest{Target: "w@" + gb.Host(), Message: tag + "-answer", TurnID: q[0].TurnID}, nil); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if asked == nil || len(asked.Messages) == 0 || asked.Messages[0].Body != tag+"-answer" {
		t.Fatalf("ask: %+v", asked)
	}

	seen := sp.drain(t)
	var briefs []amqp.Delivery
	for _, d := range seen {
		if d.Headers[bridge.HdrKind] == string(bridge.KindSend) && d.Headers[bridge.HdrTo] == w.GID && d.Headers[bridge.HdrTurnID] == nil {
			briefs = append(briefs, d)
		}
	}
	if len(seen) < 4 || len(briefs) != 1 {
		t.Fatalf("spy saw %d messages, %d briefs", len(seen), len(briefs))
	}
	if l := leaks(seen, tag); len(l) > 0 {
		t.Fatalf("the broker saw body text in %v", l)
	}
	if briefs[0].Headers[bridge.HdrSeal] != bridge.SealScheme {
		t.Fatalf("brief headers %v", briefs[0].Headers)
	}
	briefID := fmt.Sprint(briefs[0].Headers[bridge.HdrMsgID])
	for _, g := range []*gateway.Gateway{ga, gb} {
		var raw []byte
		gatewaytest.Eventually(t, 5*time.Second, "the brief's hops reach the audit log of "+g.Host(), func() bool {
			raw, _ = os.ReadFile(filepath.Join(g.StateDir(), "audit.log"))
			return bytes.Contains(raw, []byte(briefID))
		})
		if bytes.Contains(raw, []byte(tag)) {
			t.Fatalf("the audit log of %s holds body text", g.Host())
		}
	}

	// tampering: each of 20 spread-out ciphertext bytes changed, one at a time
	ch := rawChannel(t, brokerURL(t))
	pub := func(h amqp.Table, body []byte) {
		if err := ch.PublishWithContext(ctx, broker.ExchangeMsg, w.GID, false, false, amqp.Publishing{Headers: h, Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	before := gb.Core().Refused()
	b := briefs[0].Body
	const flips = 20
	for i := 0; i < flips; i++ {
		body := append([]byte(nil), b...)
		j := i * (len(body) - 1) / (flips - 1)
		body[j] ^= 0x01
		pub(briefs[0].Headers, body)
	}
	pub(briefs[0].Headers, b) // the untouched capture: a replay
	gatewaytest.Eventually(t, 10*time.Second, "B refused every tampered copy and the replay", func() bool {
		r := gb.Core().Refused()
		return r[bridge.RefuseBadSignature]-before[bridge.RefuseBadSignature] == flips && r[bridge.RefuseReplayed]-before[bridge.RefuseReplayed] == 1
	})
	if r, err := gb.Core().Poll(ctx, w.GID, bridge.PollRequest{Max: 100, Wait: 300 * time.Millisecond}, nil); err != nil || len(r.Messages) != 0 {
		t.Fatalf("a tampered or replayed brief reached the worker: %+v %v", r, err)
	}
	dead := 0
	for deadline := time.Now().Add(5 * time.Second); dead < flips+1 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for _, d := range sp.drain(t) {
			if _, ok := d.Headers["x-death"]; ok && d.Headers[bridge.HdrMsgID] == briefs[0].Headers[bridge.HdrMsgID] {
				dead++
			}
		}
	}
	if dead != flips+1 {
		t.Fatalf("%d of %d refused copies dead-lettered", dead, flips+1)
	}
}

// TestSealRotationInFlight: 20 briefs sealed to host B's HPKE key wait in
// its worker's inbox on the broker while B is down and rotates that key;
// B back up opens them with the retired key, and 20 more go out sealed to
// the new key once B's heartbeat publishes it. All 40 open.
func TestSealRotationInFlight(t *testing.T) {
	const n = 20
	ga, gb, lead, w := sealPair(t)
	sp := newSpy(t, brokerURL(t))
	ctx := context.Background()
	hostB, dirB := gb.Host(), gb.StateDir()
	gb.Close()
	send := func(prefix string) {
		for i := 0; i < n; i++ {
			if _, err := ga.Core().Send(ctx, lead.GID, bridge.SendRequest{Target: "w@" + gb.Host(), Message: fmt.Sprintf("%s-%02d", prefix, i)}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	send("old")
	nk, err := keys.RotateSealKey(dirB, hostB, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	gb = gatewaytest.StartHost(t, hostB, brokerURL(t), func(c *gateway.Config) { c.StateDir = dirB; c.Core.PresenceTTL = 10 * time.Second })
	gatewaytest.Eventually(t, 15*time.Second, "A seals to B's new key", func() bool {
		for _, s := range ga.Core().SealStates([]string{gb.Host()}) {
			return s.KeyID == nk.ID()
		}
		return false
	})
	send("new")
	got := map[string]bool{}
	for _, m := range pollFor(t, gb, w.GID, 2*n) {
		got[m.Body] = true
	}
	for _, p := range []string{"old", "new"} {
		for i := 0; i < n; i++ {
			if !got[fmt.Sprintf("%s-%02d", p, i)] {
				t.Fatalf("%s-%02d not read (got %d)", p, i, len(got))
			}
		}
	}
	ids := map[any]int{}
	for _, d := range sp.drain(t) {
		if d.Headers[bridge.HdrTo] == w.GID {
			ids[d.Headers[bridge.HdrSealKey]]++
		}
	}
	if len(ids) != 2 || ids[nk.ID()] != n {
		t.Fatalf("sealed to keys %v (new %s)", ids, nk.ID())
	}
}

// TestSealPeerWithoutKey: a trusted host whose heartbeat carries no HPKE
// key (a gateway older than sealing). Under seal auto a brief to its
// worker goes out clear (the roster says "no key"); under seal require it
// is refused with a tool error and nothing is published.
func TestSealPeerWithoutKey(t *testing.T) {
	url := brokerURL(t)
	oldHost, oldDir := gatewaytest.UniqueHost("old"), gatewaytest.TempDir(t)
	gatewaytest.JoinTrustMesh(t, oldDir, oldHost)
	oldKey, err := keys.Load(filepath.Join(oldDir, keys.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	slow := func(mode string) func(*gateway.Config) {
		return func(c *gateway.Config) { c.Core.PresenceTTL = time.Minute; c.Seal = mode }
	}
	ga := gatewaytest.StartHost(t, gatewaytest.UniqueHost("au"), url, slow(bridge.SealAuto))
	gr := gatewaytest.StartHost(t, gatewaytest.UniqueHost("rq"), url, slow(bridge.SealRequire))
	ctx := context.Background()
	la := gatewaytest.RegisterOn(t, ga, "lead", bridge.RolePrimary)
	lr := gatewaytest.RegisterOn(t, gr, "lead", bridge.RolePrimary)

	// the old host's worker: a heartbeat without sealKey, and an inbox
	ch := rawChannel(t, url)
	wgid := uuid.NewString()
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(q.Name, wgid, broker.ExchangeMsg, false, nil); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	body := fmt.Sprintf(`{"gid":%q,"name":"w","host":%q,"role":"worker"}`, wgid, oldHost)
	e := &bridge.Envelope{V: bridge.Version, Kind: bridge.KindPresence, MsgID: uuid.NewString(), From: wgid, To: "roster." + oldHost + ".w",
		Host: oldHost, TS: now, ExpiresAt: now.Add(time.Minute), Body: []byte(body)}
	e.Sig = oldKey.Sign(e.SigningInput())
	gwBody := fmt.Sprintf(`{"gid":%q,"name":"_gateway","host":%q,"key":%q}`, bridge.GatewayGID(oldHost), oldHost, oldKey.Fingerprint())
	gw := &bridge.Envelope{V: bridge.Version, Kind: bridge.KindPresence, MsgID: uuid.NewString(), From: bridge.GatewayGID(oldHost), To: "roster." + oldHost + "._gateway",
		Host: oldHost, TS: now, ExpiresAt: now.Add(time.Minute), Body: []byte(gwBody)}
	gw.Sig = oldKey.Sign(gw.SigningInput())
	for _, x := range []*bridge.Envelope{gw, e} {
		if err := ch.PublishWithContext(ctx, broker.ExchangeRoster, "roster."+oldHost, false, false, amqp.Publishing{Headers: amqp.Table(x.Headers()), Body: x.Body}); err != nil {
			t.Fatal(err)
		}
	}
	target := "w@" + oldHost
	gatewaytest.Eventually(t, 10*time.Second, "both see the old host's worker", func() bool {
		_, e1 := ga.Core().Resolve(target)
		_, e2 := gr.Core().Resolve(target)
		return e1 == nil && e2 == nil
	})
	if s := sealState(ga, oldHost); s != bridge.SealStateNoKey {
		t.Fatalf("roster says %q of a host without a key", s)
	}
	if _, err := gr.Core().Send(ctx, lr.GID, bridge.SendRequest{Target: target, Message: "require-clear"}, nil); err == nil || !strings.Contains(err.Error(), "require") {
		t.Fatalf("seal require sent clear: %v", err)
	}
	if _, err := ga.Core().Send(ctx, la.GID, bridge.SendRequest{Target: target, Message: "auto-clear"}, nil); err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for deadline := time.Now().Add(5 * time.Second); len(bodies) < 1 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for d, ok, _ := ch.Get(q.Name, true); ok; d, ok, _ = ch.Get(q.Name, true) {
			bodies = append(bodies, string(d.Body))
		}
	}
	time.Sleep(200 * time.Millisecond)
	for d, ok, _ := ch.Get(q.Name, true); ok; d, ok, _ = ch.Get(q.Name, true) {
		bodies = append(bodies, string(d.Body))
	}
	if len(bodies) != 1 || bodies[0] != "auto-clear" {
		t.Fatalf("the old host's inbox got %q", bodies)
	}
}

// TestSealKeyGoneSenderTold: a brief sealed to an HPKE key its host no
// longer holds (rotated twice while the host was down, the first retired
// key past its window) is refused as unsealable, and its sender — whose
// signature verified — hears FAILED saying why.
func TestSealKeyGoneSenderTold(t *testing.T) {
	ga, gb, lead, w := sealPair(t)
	ctx := context.Background()
	hostB, dirB := gb.Host(), gb.StateDir()
	gb.Close()
	res, err := ga.Core().Send(ctx, lead.GID, bridge.SendRequest{Target: "w@" + hostB, Message: "sealed to a key about to go"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := keys.RotateSealKey(dirB, hostB, now); err != nil {
		t.Fatal(err)
	}
	if _, err := keys.RotateSealKey(dirB, hostB, now.Add(keys.SealRetention+time.Hour)); err != nil { // prunes the first retired key
		t.Fatal(err)
	}
	gb = gatewaytest.StartHost(t, hostB, brokerURL(t), func(c *gateway.Config) { c.StateDir = dirB; c.Core.PresenceTTL = 10 * time.Second })
	gatewaytest.Eventually(t, 10*time.Second, "B refuses it as unsealable", func() bool { return gb.Core().Refused()[bridge.RefuseUnsealable] == 1 })
	var failed *bridge.Message
	for deadline := time.Now().Add(10 * time.Second); failed == nil && time.Now().Before(deadline); {
		r, err := ga.Core().Poll(ctx, lead.GID, bridge.PollRequest{Max: 10, Wait: time.Second}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range r.Messages {
			if m.Kind == bridge.KindFailed && m.Corr == res.MsgID {
				failed = &r.Messages[i]
			}
		}
	}
	if failed == nil || !strings.Contains(failed.Body, "sealed body does not open") {
		t.Fatalf("sender told: %+v", failed)
	}
	if r, _ := gb.Core().Poll(ctx, w.GID, bridge.PollRequest{Max: 10, Wait: 200 * time.Millisecond}, nil); r != nil && len(r.Messages) != 0 {
		t.Fatalf("the worker got %+v", r.Messages)
	}
}

// TestSealKeyRemembered: a gateway that restarts while its peer is down
// still seals to the peer (the key its signed heartbeat published before,
// from seal_peers), instead of sending clear until the next heartbeat.
func TestSealKeyRemembered(t *testing.T) {
	ga, gb, _, _ := sealPair(t)
	hostA, dirA, hostB := ga.Host(), ga.StateDir(), gb.Host()
	want := ga.Core().SealStates([]string{hostB})[0].KeyID
	gb.Close()
	ga.Close()
	ga = gatewaytest.StartHost(t, hostA, brokerURL(t), func(c *gateway.Config) { c.StateDir = dirA })
	if s := ga.Core().SealStates([]string{hostB})[0]; s.State != bridge.SealStateSealed || s.KeyID != want {
		t.Fatalf("after a restart with %s down: %+v (want sealed to %s)", hostB, s, want)
	}
}

// TestSealDoctor: doctor says the mode and this host's key on "seal", and
// per peer "seal HOST": ok sealed to its key id; under seal require, a
// peer whose key this host does not know fails.
func TestSealDoctor(t *testing.T) {
	ga, gb, _, _ := sealPair(t)
	res := doctor(ga)
	if c := check(res, "seal"); c.Status != gateway.CheckOK || !strings.Contains(c.Detail, bridge.SealScheme) || !strings.Contains(c.Detail, "broadcasts go clear") {
		t.Fatalf("seal line: %+v", c)
	}
	want := ga.Core().SealStates([]string{gb.Host()})[0].KeyID
	if c := check(res, "seal "+gb.Host()); c.Status != gateway.CheckOK || !strings.Contains(c.Detail, want) {
		t.Fatalf("seal %s line: %+v", gb.Host(), c)
	}

	// a host that trusts A but has never heard A's heartbeat (A is down
	// before it starts): no key, and under require that fails
	hostA := ga.Host()
	ga.Close()
	gr := gatewaytest.StartHost(t, gatewaytest.UniqueHost("dr"), brokerURL(t), func(c *gateway.Config) { c.Seal = bridge.SealRequire })
	c := check(doctor(gr), "seal "+hostA)
	if c.Status != gateway.CheckFail || !strings.Contains(c.Detail, "no key") {
		t.Fatalf("seal %s under require with no key: %+v", hostA, c)
	}
}
