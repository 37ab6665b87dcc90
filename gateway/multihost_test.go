package gateway_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/herdr"
	"github.com/herdbridge/herdbridge/herdr/herdrtest"
	"github.com/herdbridge/herdbridge/keys"
)

// TestCrossHost: three gateways on one broker (distinct host ids, state
// dirs, ports), real MCP clients: a brief across hosts and the reply that
// resolves the open send, ask/answer, no_waiter, too_late, broadcast to all
// and to a group, and a host with no agents in the roster.
func TestCrossHost(t *testing.T) {
	hostA, hostB, hostC := gatewaytest.UniqueHost("a"), gatewaytest.UniqueHost("b"), gatewaytest.UniqueHost("c")
	ga := gatewaytest.StartHost(t, hostA, brokerURL(t))
	gb := gatewaytest.StartHost(t, hostB, brokerURL(t))
	gc := gatewaytest.StartHost(t, hostC, brokerURL(t)) // agentless
	_ = gc
	p := gatewaytest.HTTPConn(t, ga, "lead", "primary")
	w := gatewaytest.StdioConn(t, gb, "worker-b", "worker", "build")
	gatewaytest.Eventually(t, 10*time.Second, "host A sees worker-b and host C", func() bool {
		r := ga.Core().Roster()
		seenW, seenC := false, false
		for _, e := range r.Entities {
			seenW = seenW || e.Name == "worker-b" && e.Host == hostB
		}
		for _, h := range r.Hosts {
			seenC = seenC || h.Host == hostC
		}
		return seenW && seenC
	})
	gatewaytest.Eventually(t, 10*time.Second, "host B sees lead", func() bool {
		_, err := gb.Core().Resolve("lead@" + hostA)
		return err == nil
	})

	// brief across hosts, reply resolves the open send
	var sent gatewaytest.CallResult
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sent = p.Call("bridge_send", map[string]any{"target": "worker-b@" + hostB, "message": "cross-host brief", "wait_s": 8})
	}()
	got := waitPoll(t, w, "cross-host brief")
	if got.Messages[0].FromName != "lead@"+hostA {
		t.Fatalf("fromName %q", got.Messages[0].FromName)
	}
	w.MustStatus("bridge_send", map[string]any{"target": "lead@" + hostA, "message": "done across"}, "confirmed")
	wg.Wait()
	if sent.Status != "replied" || sent.Messages[0].Body != "done across" {
		t.Fatalf("open send: %+v (%s)", sent.Result, sent.Text)
	}

	// ask → answer across hosts
	wg.Add(1)
	go func() {
		defer wg.Done()
		sent = p.Call("bridge_send", map[string]any{"target": "worker-b", "message": "next", "wait_s": 8})
	}()
	waitPoll(t, w, "next")
	var asked gatewaytest.CallResult
	var awg sync.WaitGroup
	awg.Add(1)
	go func() { defer awg.Done(); asked = w.Call("bridge_ask", map[string]any{"question": "which?"}) }()
	wg.Wait()
	if sent.Status != "asked" {
		t.Fatalf("send: %+v", sent.Result)
	}
	p.MustStatus("bridge_send", map[string]any{"target": "worker-b", "message": "this one", "turn_id": sent.TurnID}, "delivered")
	awg.Wait()
	if asked.Status != "answered" || asked.Messages[0].Body != "this one" {
		t.Fatalf("ask: %+v", asked.Result)
	}
	// no waiter across hosts
	w.MustStatus("bridge_ask", map[string]any{"question": "anyone?"}, "no_waiter")
	// late answer → too_late
	wg.Add(1)
	go func() {
		defer wg.Done()
		sent = p.Call("bridge_send", map[string]any{"target": "worker-b", "message": "last", "wait_s": 8})
	}()
	waitPoll(t, w, "last")
	if r := w.Call("bridge_ask", map[string]any{"question": "quick?", "timeout_s": 1}); r.Status != "expired" {
		t.Fatalf("short ask: %+v", r.Result)
	}
	wg.Wait()
	p.MustStatus("bridge_send", map[string]any{"target": "worker-b", "message": "late", "turn_id": sent.TurnID}, "too_late")

	// broadcast to all and to a group
	other := gatewaytest.HTTPConn(t, gc, "other-c", "worker")
	gatewaytest.Eventually(t, 10*time.Second, "host A sees other-c", func() bool {
		_, err := ga.Core().Resolve("other-c")
		return err == nil
	})
	p.MustStatus("bridge_broadcast", map[string]any{"message": "everyone"}, "confirmed")
	waitPoll(t, w, "everyone")
	waitPoll(t, other, "everyone")
	p.MustStatus("bridge_broadcast", map[string]any{"message": "builders", "group": "build"}, "confirmed")
	waitPoll(t, w, "builders")
	if r := other.Call("bridge_poll", map[string]any{"wait_s": 1}); r.Status != "empty" {
		t.Fatalf("a group broadcast reached a non-member: %+v", r.Messages)
	}
}

// TestSameHostIDRefused: a second gateway claiming a host id already in use
// on the broker fails loudly.
// On quorum queues too, where the control queue's single active consumer
// would queue the second gateway instead of refusing it: the exclusive
// roster.<host> presence queue refuses it.
func TestSameHostIDRefused(t *testing.T) {
	for _, qtype := range []string{"classic", "quorum"} {
		t.Run(qtype, func(t *testing.T) {
			host := gatewaytest.UniqueHost("dup")
			gatewaytest.StartHost(t, host, brokerURL(t), func(c *gateway.Config) { c.QueueType = qtype })
			cfg := gateway.Config{StateDir: gatewaytest.TempDir(t), Listen: "127.0.0.1:0", Host: host, Logger: gatewaytest.Logger(), Broker: brokerURL(t),
				QueueType: qtype}
			cfg.File.Herdr.Disabled = true
			g, err := gateway.Open(context.Background(), cfg)
			if err == nil {
				g.Close()
				t.Fatal("a second gateway with the same host id started")
			}
			if !strings.Contains(err.Error(), "host id") {
				t.Fatalf("error: %v", err)
			}
		})
	}
}

// TestCrossHostSpawn: bridge_spawn on another host goes as SPAWN to
// control.<host>; that host starts its own profile in a herdr pane; the
// caller returns once the worker is in the roster and briefs it through the
// forward path. The same SPAWN delivered twice opens one pane.
func TestCrossHostSpawn(t *testing.T) {
	fake := herdrtest.New(t)
	fake.AddAgent(herdrtest.PaneOptions{Agent: "claude"}) // a workspace to spawn into
	hostA, hostB := gatewaytest.UniqueHost("sa"), gatewaytest.UniqueHost("sb")
	ga := gatewaytest.StartHost(t, hostA, brokerURL(t))
	cfg := gateway.Config{StateDir: gatewaytest.TempDir(t), Listen: "127.0.0.1:0", Host: hostB, Logger: gatewaytest.Logger(), Broker: brokerURL(t),
		TrustReload: gatewaytest.TrustReload}
	gatewaytest.JoinTrustMesh(t, cfg.StateDir, hostB)
	cfg.File.Herdr.Socket = fake.SocketPath()
	cfg.File.Profiles = map[string]herdr.Profile{"reviewer": {Kind: "claude"}}
	cfg.Core.PresenceEvery = 300 * time.Millisecond
	cfg.Core.SweepEvery = 100 * time.Millisecond
	gb := gatewaytest.Start(t, cfg)
	gatewaytest.MeshStarted(gb)
	p := gatewaytest.HTTPConn(t, ga, "lead", "primary")
	gatewaytest.Eventually(t, 10*time.Second, "A sees host B with its profile", func() bool {
		for _, h := range ga.Core().Roster().Hosts {
			if h.Host == hostB && len(h.Profiles) == 1 {
				return true
			}
		}
		return false
	})
	if r := p.Call("bridge_spawn", map[string]any{"host": hostB, "profile": "nope"}); !r.IsError || !strings.Contains(r.Text, "reviewer") {
		t.Fatalf("unknown remote profile: %+v %s", r.Result, r.Text)
	}
	panes := len(fake.PaneIDs())
	r := p.Call("bridge_spawn", map[string]any{"host": hostB, "profile": "reviewer", "name": "rev-b", "brief": "Review it."})
	if r.IsError || r.Status != "submitted" || r.SpawnID == "" {
		t.Fatalf("remote spawn: %+v %s", r.Result, r.Text)
	}
	e, err := gb.Core().Resolve("rev-b")
	if err != nil || e.GID != r.SpawnID {
		t.Fatalf("worker on B: %+v %v", e, err)
	}
	if s := fake.Submitted(e.PaneID); len(s) != 1 || !strings.Contains(s[0], "Review it.") {
		t.Fatalf("brief in the new pane: %q", s)
	}
	// the same SPAWN, delivered twice, opens no second pane
	body := `{"profile":"reviewer","name":"rev-b2"}`
	id := "3f1a0c9e-5b6d-4e7f-8a9b-0c1d2e3f4a5b"
	ka, err := keys.Load(filepath.Join(ga.StateDir(), keys.KeyFile)) // signed by host A, as its gateway would
	if err != nil {
		t.Fatal(err)
	}
	var last *bridge.Envelope
	for i := 0; i < 2; i++ {
		now := time.Now()
		env := &bridge.Envelope{V: bridge.Version, Kind: bridge.KindSpawn, MsgID: uuid.NewString(), From: p.GID(t, ga), To: "control." + hostB,
			Host: hostA, SpawnID: id, TS: now, ExpiresAt: now.Add(time.Minute), Body: []byte(body)}
		env.Sig = ka.Sign(env.SigningInput())
		if err := ga.Transport().(bridge.ControlTransport).PublishControl(context.Background(), hostB, env); err != nil {
			t.Fatal(err)
		}
		last = env
	}
	gatewaytest.Eventually(t, 10*time.Second, "rev-b2 registered on B", func() bool { _, err := gb.Core().Resolve("rev-b2"); return err == nil })
	time.Sleep(time.Second) // let the duplicate be handled
	if n := len(fake.PaneIDs()) - panes; n != 2 {
		t.Fatalf("%d panes opened for two spawns (one delivered twice)", n)
	}
	// the very same signed SPAWN replayed (same msgId): refused, no pane
	if err := ga.Transport().(bridge.ControlTransport).PublishControl(context.Background(), hostB, last); err != nil {
		t.Fatal(err)
	}
	gatewaytest.Eventually(t, 10*time.Second, "the replayed SPAWN refused", func() bool { return gb.Core().Refused()[bridge.RefuseReplayed] == 1 })
	if n := len(fake.PaneIDs()) - panes; n != 2 {
		t.Fatalf("%d panes after a replayed SPAWN", n)
	}
}
