package main

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker/brokertest"
	"github.com/herdbridge/herdbridge/herdr"
	"github.com/herdbridge/herdbridge/herdr/herdrtest"
	"github.com/herdbridge/herdbridge/keys"
)

func brokerURL(t testing.TB) string { return brokertest.URL(t) }

// startHostGateway runs one host's gateway on the shared broker.
func startHostGateway(t testing.TB, host string, tune ...func(*Gateway)) *Gateway {
	t.Helper()
	return startHostGatewayOn(t, host, brokerURL(t), tune...)
}

// startHostGatewayOn runs one host's gateway on the broker at url.
func startHostGatewayOn(t testing.TB, host, url string, tune ...func(*Gateway)) *Gateway {
	t.Helper()
	g := &Gateway{StateDir: shortTempDir(t), Listen: "127.0.0.1:0", Host: host, Logger: testLogger(), Broker: url}
	g.Config.Herdr.Disabled = true
	g.Core.MaxWait = 8 * time.Second
	g.Core.ReceiptWait = 5 * time.Second
	g.Core.SweepEvery = 100 * time.Millisecond
	g.Core.PresenceEvery = 300 * time.Millisecond
	for _, f := range tune {
		f(g)
	}
	joinTrustMesh(t, g.StateDir, host)
	if err := g.Start(context.Background()); err != nil {
		t.Fatalf("start gateway %s: %v", host, err)
	}
	meshStarted(g)
	t.Cleanup(func() { g.Close() })
	return g
}

func uniqueHost(prefix string) string {
	return prefix + "-" + strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "")
}

// TestCrossHost: three gateways on one broker (distinct host ids, state
// dirs, ports), real MCP clients: a brief across hosts and the reply that
// resolves the open send, ask/answer, no_waiter, too_late, broadcast to all
// and to a group, and a host with no agents in the roster.
func TestCrossHost(t *testing.T) {
	hostA, hostB, hostC := uniqueHost("a"), uniqueHost("b"), uniqueHost("c")
	ga := startHostGateway(t, hostA)
	gb := startHostGateway(t, hostB)
	gc := startHostGateway(t, hostC) // agentless
	_ = gc
	p := httpConn(t, ga, "lead", "primary")
	w := stdioConn(t, gb, "worker-b", "worker", "build")
	eventually(t, 10*time.Second, "host A sees worker-b and host C", func() bool {
		r := ga.BridgeCore().Roster()
		seenW, seenC := false, false
		for _, e := range r.Entities {
			seenW = seenW || e.Name == "worker-b" && e.Host == hostB
		}
		for _, h := range r.Hosts {
			seenC = seenC || h.Host == hostC
		}
		return seenW && seenC
	})
	eventually(t, 10*time.Second, "host B sees lead", func() bool {
		_, err := gb.BridgeCore().Resolve("lead@" + hostA)
		return err == nil
	})

	// brief across hosts, reply resolves the open send
	var sent callResult
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sent = p.call("bridge_send", map[string]any{"target": "worker-b@" + hostB, "message": "cross-host brief", "wait_s": 8})
	}()
	got := waitPoll(t, w, "cross-host brief")
	if got.Messages[0].FromName != "lead@"+hostA {
		t.Fatalf("fromName %q", got.Messages[0].FromName)
	}
	w.mustStatus("bridge_send", map[string]any{"target": "lead@" + hostA, "message": "done across"}, "confirmed")
	wg.Wait()
	if sent.Status != "replied" || sent.Messages[0].Body != "done across" {
		t.Fatalf("open send: %+v (%s)", sent.Result, sent.Text)
	}

	// ask → answer across hosts
	wg.Add(1)
	go func() {
		defer wg.Done()
		sent = p.call("bridge_send", map[string]any{"target": "worker-b", "message": "next", "wait_s": 8})
	}()
	waitPoll(t, w, "next")
	var asked callResult
	var awg sync.WaitGroup
	awg.Add(1)
	go func() { defer awg.Done(); asked = w.call("bridge_ask", map[string]any{"question": "which?"}) }()
	wg.Wait()
	if sent.Status != "asked" {
		t.Fatalf("send: %+v", sent.Result)
	}
	p.mustStatus("bridge_send", map[string]any{"target": "worker-b", "message": "this one", "turn_id": sent.TurnID}, "delivered")
	awg.Wait()
	if asked.Status != "answered" || asked.Messages[0].Body != "this one" {
		t.Fatalf("ask: %+v", asked.Result)
	}
	// no waiter across hosts
	w.mustStatus("bridge_ask", map[string]any{"question": "anyone?"}, "no_waiter")
	// late answer → too_late
	wg.Add(1)
	go func() {
		defer wg.Done()
		sent = p.call("bridge_send", map[string]any{"target": "worker-b", "message": "last", "wait_s": 8})
	}()
	waitPoll(t, w, "last")
	if r := w.call("bridge_ask", map[string]any{"question": "quick?", "timeout_s": 1}); r.Status != "expired" {
		t.Fatalf("short ask: %+v", r.Result)
	}
	wg.Wait()
	p.mustStatus("bridge_send", map[string]any{"target": "worker-b", "message": "late", "turn_id": sent.TurnID}, "too_late")

	// broadcast to all and to a group
	other := httpConn(t, gc, "other-c", "worker")
	eventually(t, 10*time.Second, "host A sees other-c", func() bool {
		_, err := ga.BridgeCore().Resolve("other-c")
		return err == nil
	})
	p.mustStatus("bridge_broadcast", map[string]any{"message": "everyone"}, "confirmed")
	waitPoll(t, w, "everyone")
	waitPoll(t, other, "everyone")
	p.mustStatus("bridge_broadcast", map[string]any{"message": "builders", "group": "build"}, "confirmed")
	waitPoll(t, w, "builders")
	if r := other.call("bridge_poll", map[string]any{"wait_s": 1}); r.Status != "empty" {
		t.Fatalf("a group broadcast reached a non-member: %+v", r.Messages)
	}
}

// TestSameHostIDRefused: a second gateway claiming a host id already in use
// on the broker fails loudly.
func TestSameHostIDRefused(t *testing.T) {
	host := uniqueHost("dup")
	startHostGateway(t, host)
	g := &Gateway{StateDir: shortTempDir(t), Listen: "127.0.0.1:0", Host: host, Logger: testLogger(), Broker: brokerURL(t)}
	g.Config.Herdr.Disabled = true
	err := g.Start(context.Background())
	if err == nil {
		g.Close()
		t.Fatal("a second gateway with the same host id started")
	}
	if !strings.Contains(err.Error(), "host id") {
		t.Fatalf("error: %v", err)
	}
}

// TestCrossHostSpawn: bridge_spawn on another host goes as SPAWN to
// control.<host>; that host starts its own profile in a herdr pane; the
// caller returns once the worker is in the roster and briefs it through the
// forward path. The same SPAWN delivered twice opens one pane.
func TestCrossHostSpawn(t *testing.T) {
	fake := herdrtest.New(t)
	fake.AddAgent(herdrtest.PaneOptions{Agent: "claude"}) // a workspace to spawn into
	hostA, hostB := uniqueHost("sa"), uniqueHost("sb")
	ga := startHostGateway(t, hostA)
	gb := &Gateway{StateDir: shortTempDir(t), Listen: "127.0.0.1:0", Host: hostB, Logger: testLogger(), Broker: brokerURL(t)}
	joinTrustMesh(t, gb.StateDir, hostB)
	gb.Config.Herdr.Socket = fake.SocketPath()
	gb.Config.Profiles = map[string]herdr.Profile{"reviewer": {Kind: "claude"}}
	gb.Core.PresenceEvery = 300 * time.Millisecond
	gb.Core.SweepEvery = 100 * time.Millisecond
	if err := gb.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	meshStarted(gb)
	t.Cleanup(func() { gb.Close() })
	p := httpConn(t, ga, "lead", "primary")
	eventually(t, 10*time.Second, "A sees host B with its profile", func() bool {
		for _, h := range ga.BridgeCore().Roster().Hosts {
			if h.Host == hostB && len(h.Profiles) == 1 {
				return true
			}
		}
		return false
	})
	if r := p.call("bridge_spawn", map[string]any{"host": hostB, "profile": "nope"}); !r.IsError || !strings.Contains(r.Text, "reviewer") {
		t.Fatalf("unknown remote profile: %+v %s", r.Result, r.Text)
	}
	panes := len(fake.PaneIDs())
	r := p.call("bridge_spawn", map[string]any{"host": hostB, "profile": "reviewer", "name": "rev-b", "brief": "Review it."})
	if r.IsError || r.Status != "submitted" || r.SpawnID == "" {
		t.Fatalf("remote spawn: %+v %s", r.Result, r.Text)
	}
	e, err := gb.BridgeCore().Resolve("rev-b")
	if err != nil || e.GID != r.SpawnID {
		t.Fatalf("worker on B: %+v %v", e, err)
	}
	if s := fake.Submitted(e.PaneID); len(s) != 1 || !strings.Contains(s[0], "Review it.") {
		t.Fatalf("brief in the new pane: %q", s)
	}
	// the same SPAWN, delivered twice, opens no second pane
	body := `{"profile":"reviewer","name":"rev-b2"}`
	id := "3f1a0c9e-5b6d-4e7f-8a9b-0c1d2e3f4a5b"
	ka, err := keys.Load(filepath.Join(ga.StateDir, keys.KeyFile)) // signed by host A, as its gateway would
	if err != nil {
		t.Fatal(err)
	}
	var last *bridge.Envelope
	for i := 0; i < 2; i++ {
		now := time.Now()
		env := &bridge.Envelope{V: bridge.Version, Kind: bridge.KindSpawn, MsgID: uuid.NewString(), From: p.gid(t, ga), To: "control." + hostB,
			Host: hostA, SpawnID: id, TS: now, ExpiresAt: now.Add(time.Minute), Body: []byte(body)}
		env.Sig = ka.Sign(env.SigningInput())
		if err := ga.tr.(bridge.ControlTransport).PublishControl(context.Background(), hostB, env); err != nil {
			t.Fatal(err)
		}
		last = env
	}
	eventually(t, 10*time.Second, "rev-b2 registered on B", func() bool { _, err := gb.BridgeCore().Resolve("rev-b2"); return err == nil })
	time.Sleep(time.Second) // let the duplicate be handled
	if n := len(fake.PaneIDs()) - panes; n != 2 {
		t.Fatalf("%d panes opened for two spawns (one delivered twice)", n)
	}
	// the very same signed SPAWN replayed (same msgId): refused, no pane
	if err := ga.tr.(bridge.ControlTransport).PublishControl(context.Background(), hostB, last); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the replayed SPAWN refused", func() bool { return gb.BridgeCore().Refused()[bridge.RefuseReplayed] == 1 })
	if n := len(fake.PaneIDs()) - panes; n != 2 {
		t.Fatalf("%d panes after a replayed SPAWN", n)
	}
}

func (cn *conn) gid(t testing.TB, g *Gateway) string {
	t.Helper()
	e, err := g.BridgeCore().Resolve(cn.name)
	if err != nil {
		t.Fatal(err)
	}
	return e.GID
}

// regOn registers name on g's core (no MCP client), failing the test on error.
func regOn(t testing.TB, g *Gateway, name string, role bridge.Role) bridge.Entity {
	t.Helper()
	e, _, err := g.BridgeCore().Register(context.Background(), bridge.RegisterRequest{Name: name, Role: role})
	if err != nil {
		t.Fatalf("register %s on %s: %v", name, g.Host, err)
	}
	return e
}
