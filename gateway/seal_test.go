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
	"github.com/herdbridge/herdbridge/herdr"
	"github.com/herdbridge/herdbridge/herdr/herdrtest"
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
	return sealPairWith(t, tune, tune)
}

// sealPairWith is sealPair with host A tuned by tuneA and B by tuneB.
func sealPairWith(t *testing.T, tuneA, tuneB []func(*gateway.Config)) (ga, gb *gateway.Gateway, lead, w bridge.Entity) {
	url := brokerURL(t)
	slow := func(c *gateway.Config) { c.Core.PresenceTTL = 10 * time.Second }
	ga = gatewaytest.StartHost(t, gatewaytest.UniqueHost("sa"), url, append([]func(*gateway.Config){slow}, tuneA...)...)
	gb = gatewaytest.StartHost(t, gatewaytest.UniqueHost("sb"), url, append([]func(*gateway.Config){slow}, tuneB...)...)
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
// AMQP finds none of the uniquely tagged texts of a brief, a reply, a
// question and its answer, a broadcast (sealed once to both hosts), a
// brief the role policy refused (its FAILED quotes it), a STOP's reason
// and the ABANDONED that carries a worker's own stop reason to its
// waiting primary, a bridge_spawn's brief, and a GIVE_UP of a pane brief
// gone overdue; the recipients read them all; neither audit log holds
// them. A captured sealed brief with any ciphertext byte changed is
// refused (bad signature) and dead-lettered, and one replayed as is is
// refused as a replay.
func TestSealedOnBroker(t *testing.T) {
	fake := herdrtest.New(t)
	fake.AddAgent(herdrtest.PaneOptions{Agent: "claude"}) // a workspace to spawn into
	quick := func(c *gateway.Config) {
		c.Core.InjectWait, c.Core.ReceiptWait = time.Second, time.Second
		c.File.RolePolicy.WorkersMayBrief = true // A lets its workers brief; B does not
	}
	withHerdr := func(c *gateway.Config) {
		c.File.Herdr.Disabled = false
		c.File.Herdr.Socket = fake.SocketPath()
		c.Core.PaneRecheck = 200 * time.Millisecond
		c.File.Profiles = map[string]herdr.Profile{"reviewer": {Kind: "claude"}}
	}
	ga, gb, lead, w := sealPairWith(t, []func(*gateway.Config){quick}, []func(*gateway.Config){withHerdr})
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

	// a broadcast: one publish, sealed to both hosts, opened on B
	if _, err := ga.Core().Broadcast(ctx, lead.GID, bridge.BroadcastRequest{Message: tag + "-broadcast"}); err != nil {
		t.Fatal(err)
	}
	if m := pollFor(t, gb, w.GID, 1); m[0].Body != tag+"-broadcast" || m[0].Kind != bridge.KindBroadcast {
		t.Fatalf("worker read %+v", m[0])
	}
	// a worker of A briefing B's worker: B's role policy answers FAILED, quoting it
	w2 := gatewaytest.RegisterOn(t, ga, "w2", bridge.RoleWorker)
	gatewaytest.Eventually(t, 10*time.Second, "B sees A's second worker", func() bool {
		_, err := gb.Core().Resolve("w2@" + ga.Host())
		return err == nil
	})
	if _, err := ga.Core().Send(ctx, w2.GID, bridge.SendRequest{Target: "w@" + gb.Host(), Message: tag + "-policy"}, nil); err != nil {
		t.Fatal(err)
	}
	if m := pollFor(t, ga, w2.GID, 1); m[0].Kind != bridge.KindFailed || !strings.Contains(m[0].Body, tag+"-policy") {
		t.Fatalf("w2 heard %+v", m[0])
	}
	// a worker of B stops itself while its primary waits on a brief: the
	// ABANDONED carries its reason; A stops another of B's workers with a
	// reason: the STOP carries it
	wx := gatewaytest.RegisterOn(t, gb, "wx", bridge.RoleWorker)
	gatewaytest.RegisterOn(t, gb, "wy", bridge.RoleWorker)
	gatewaytest.Eventually(t, 10*time.Second, "A sees wx and wy", func() bool {
		_, e1 := ga.Core().Resolve("wx@" + gb.Host())
		_, e2 := ga.Core().Resolve("wy@" + gb.Host())
		return e1 == nil && e2 == nil
	})
	var waited *bridge.Result
	wg.Add(1)
	go func() {
		defer wg.Done()
		var err error
		if waited, err = ga.Core().Send(ctx, lead.GID, bridge.SendRequest{Target: "wx@" + gb.Host(), Message: "work on it", Wait: 15 * time.Second}, nil); err != nil {
			t.Error(err)
		}
	}()
	pollFor(t, gb, wx.GID, 1)
	if _, err := gb.Core().Stop(ctx, wx.GID, bridge.StopRequest{Target: "wx", Reason: tag + "-abandon"}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if waited == nil || waited.Status != bridge.StatusAbandoned || len(waited.Messages) != 1 || !strings.Contains(waited.Messages[0].Body, tag+"-abandon") {
		t.Fatalf("the primary's wait on the stopped worker: %+v", waited)
	}
	if _, err := ga.Core().Stop(ctx, lead.GID, bridge.StopRequest{Target: "wy@" + gb.Host(), Reason: tag + "-stop"}); err != nil {
		t.Fatal(err)
	}
	gatewaytest.Eventually(t, 10*time.Second, "B stopped wy", func() bool {
		_, err := gb.Core().Resolve("wy")
		return err != nil
	})
	// a spawn on B with a brief: the brief reaches the new pane
	spawned, err := ga.Core().Spawn(ctx, lead.GID, bridge.SpawnRequest{Host: gb.Host(), Profile: "reviewer", Name: "rev", Brief: tag + "-spawn"})
	if err != nil || spawned.Status == bridge.StatusFailed {
		t.Fatalf("spawn: %+v %v", spawned, err)
	}
	rev, err := gb.Core().Resolve("rev")
	if err != nil {
		t.Fatal(err)
	}
	gatewaytest.Eventually(t, 10*time.Second, "the spawn's brief typed into the new pane", func() bool {
		s := fake.Submitted(rev.PaneID)
		return len(s) == 1 && strings.Contains(s[0], tag+"-spawn")
	})
	if head := strings.SplitN(fake.Submitted(rev.PaneID)[0], "\n", 2)[0]; !strings.Contains(head, "[sender lead@"+ga.Host()+", role primary, signature of host "+ga.Host()+" verified]") {
		t.Fatalf("the spawn brief's header names no verified provenance: %q", head)
	}

	seen := sp.drain(t)
	var briefs []amqp.Delivery
	for _, d := range seen {
		if d.Headers[bridge.HdrKind] == string(bridge.KindSend) && d.Headers[bridge.HdrTo] == w.GID && d.Headers[bridge.HdrFrom] == lead.GID && d.Headers[bridge.HdrTurnID] == nil {
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
	kinds := map[any]int{}
	for _, d := range seen {
		kinds[d.Headers[bridge.HdrKind]]++
		if d.Headers[bridge.HdrKind] == string(bridge.KindBroadcast) && d.Headers[bridge.HdrSeal] != bridge.SealMultiScheme {
			t.Fatalf("broadcast headers %v", d.Headers)
		}
	}
	for _, k := range []bridge.Kind{bridge.KindBroadcast, bridge.KindFailed, bridge.KindStop, bridge.KindAbandoned, bridge.KindSpawn} {
		if kinds[string(k)] == 0 {
			t.Fatalf("the spy saw no %s (saw %v)", k, kinds)
		}
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

	// a pane brief to B while B is down: no receipt, so A's gateway asks
	// B's to give it up (GIVE_UP on control.B, never sealed)
	gb.Close()
	gone, err := ga.Core().Send(ctx, lead.GID, bridge.SendRequest{Target: "rev@" + gb.Host(), Message: tag + "-giveup"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var giveUps []amqp.Delivery
	for deadline := time.Now().Add(15 * time.Second); len(giveUps) == 0 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		for _, d := range sp.drain(t) {
			if l := leaks([]amqp.Delivery{d}, tag); len(l) > 0 {
				t.Fatalf("the broker saw body text in %v", l)
			}
			if d.Headers[bridge.HdrKind] == string(bridge.KindGiveUp) && d.Headers[bridge.HdrCorr] == gone.MsgID {
				giveUps = append(giveUps, d)
			}
		}
	}
	if len(giveUps) == 0 {
		t.Fatal("no GIVE_UP of the overdue brief on the broker")
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
// worker goes out clear (the roster says "no key"), and so does a
// broadcast, which that host could not open sealed; doctor warns of both.
// Under seal require either is refused with a tool error and nothing is
// published.
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
	for _, key := range []string{wgid, bridge.BroadcastAll} {
		if err := ch.QueueBind(q.Name, key, broker.ExchangeMsg, false, nil); err != nil {
			t.Fatal(err)
		}
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
	if _, err := gr.Core().Broadcast(ctx, lr.GID, bridge.BroadcastRequest{Message: "require-broadcast"}); err == nil || !strings.Contains(err.Error(), "require") || !strings.Contains(err.Error(), oldHost) {
		t.Fatalf("seal require broadcast clear: %v", err)
	}
	if _, err := ga.Core().Send(ctx, la.GID, bridge.SendRequest{Target: target, Message: "auto-clear"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ga.Core().Broadcast(ctx, la.GID, bridge.BroadcastRequest{Message: "auto-broadcast"}); err != nil {
		t.Fatal(err)
	}
	res := doctor(ga)
	if c := check(res, "seal "+oldHost); c.Status != gateway.CheckWarn || !strings.Contains(c.Detail, "no key") {
		t.Fatalf("doctor, seal auto, a peer without key: %+v", c)
	}
	if c := check(res, "seal broadcasts"); c.Status != gateway.CheckWarn || !strings.Contains(c.Detail, oldHost) {
		t.Fatalf("doctor, seal auto, broadcasts with a peer without key: %+v", c)
	}
	if c := check(doctor(gr), "seal broadcasts"); c.Status != gateway.CheckFail {
		t.Fatalf("doctor, seal require, broadcasts with a peer without key: %+v", c)
	}
	var bodies []string
	for deadline := time.Now().Add(5 * time.Second); len(bodies) < 2 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for d, ok, _ := ch.Get(q.Name, true); ok; d, ok, _ = ch.Get(q.Name, true) {
			bodies = append(bodies, string(d.Body))
		}
	}
	time.Sleep(200 * time.Millisecond)
	for d, ok, _ := ch.Get(q.Name, true); ok; d, ok, _ = ch.Get(q.Name, true) {
		bodies = append(bodies, string(d.Body))
	}
	if len(bodies) != 2 || bodies[0] != "auto-clear" || bodies[1] != "auto-broadcast" {
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
	if c := check(res, "seal"); c.Status != gateway.CheckOK || !strings.Contains(c.Detail, bridge.SealScheme) {
		t.Fatalf("seal line: %+v", c)
	}
	if c := check(res, "seal broadcasts"); c.Status != gateway.CheckOK || !strings.Contains(c.Detail, bridge.SealMultiScheme) {
		t.Fatalf("seal broadcasts line: %+v", c)
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
