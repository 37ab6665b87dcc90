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
	"github.com/herdbridge/herdbridge/herdr/herdrtest"
	"github.com/herdbridge/herdbridge/keys"
)

// askTrace traces id through g's admin socket, as `herdbridge trace` does.
func askTrace(t *testing.T, g *gateway.Gateway, id string, wait time.Duration) *bridge.TraceReport {
	t.Helper()
	r, err := gateway.Ask(g.StateDir(), gateway.Request{Op: "trace", ID: id, WaitMs: wait.Milliseconds()})
	if err != nil || r.Trace == nil {
		t.Fatalf("trace %s: %+v %v", id, r, err)
	}
	return r.Trace
}

// hopIndex is where seen:kind:hop first is in tl, -1 if not.
func hopIndex(tl []bridge.TraceHop, seen string, kind bridge.Kind, hop bridge.Hop) int {
	for i, h := range tl {
		if h.Seen == seen && h.Kind == kind && h.Hop == hop {
			return i
		}
	}
	return -1
}

// wantInOrder reports the first of steps missing from tl or out of order.
func wantInOrder(tl []bridge.TraceHop, steps ...string) string {
	last := -1
	for _, s := range steps {
		f := strings.SplitN(s, ":", 3)
		i := hopIndex(tl, f[0], bridge.Kind(f[1]), bridge.Hop(f[2]))
		if i < 0 {
			return s + " missing"
		}
		if i < last {
			return s + " out of order"
		}
		last = i
	}
	return ""
}

func timelineText(tl []bridge.TraceHop) string {
	var b strings.Builder
	for _, h := range tl {
		b.WriteString("\n  " + h.At.Format("15:04:05.000") + " " + h.Seen + " " + string(h.Kind) + " " + string(h.Hop) + " " + h.Verdict)
	}
	return b.String()
}

// TestTraceAcrossHosts: a primary on host A briefs a worker in a herdr pane
// on host B (the fake herdr) and gets its reply. `trace <traceId>` on A
// lists every hop from both hosts' audit logs in order — A's publish, B's
// accept, queue and inject, B's INJECTED and REPLY, A's accept of both —
// with the latency since each message's previous hop; `trace <msgId>` of
// the brief finds its receipt and reply by corr; an agentless host C
// answers with nothing. Once C's gateway is gone (its presence not yet
// expired), C is listed as not answering and the trace returns at its
// bound.
func TestTraceAcrossHosts(t *testing.T) {
	url := brokerURL(t)
	fake := herdrtest.New(t)
	pane := fake.AddAgent(herdrtest.PaneOptions{Agent: "claude"})
	hostA, hostB, hostC := gatewaytest.UniqueHost("ta"), gatewaytest.UniqueHost("tb"), gatewaytest.UniqueHost("tc")
	ttl := func(c *gateway.Config) { c.Core.PresenceTTL = time.Minute } // C stays in A's presence after it stops
	ga := gatewaytest.StartHost(t, hostA, url, ttl)
	cfg := gatewaytest.HostConfig(t, hostB, url)
	cfg.File.Herdr.Disabled = false
	cfg.File.Herdr.Socket = fake.SocketPath()
	cfg.Core.InjectWait = 8 * time.Second
	cfg.Core.PaneRecheck = 200 * time.Millisecond
	gatewaytest.JoinTrustMesh(t, cfg.StateDir, hostB)
	gb := gatewaytest.Start(t, cfg)
	gatewaytest.MeshStarted(gb)
	gc := gatewaytest.StartHost(t, hostC, url)

	p := gatewaytest.HTTPConn(t, ga, "lead", "primary")
	w := gatewaytest.PaneConn(t, gb, "w", "worker", pane)
	gatewaytest.Eventually(t, 10*time.Second, "A sees w on B and host C; B sees lead", func() bool {
		_, e1 := ga.Core().Resolve("w@" + hostB)
		_, e2 := gb.Core().Resolve("lead@" + hostA)
		seenC := false
		for _, h := range ga.Core().Roster().Hosts {
			seenC = seenC || h.Host == hostC
		}
		return e1 == nil && e2 == nil && seenC
	})
	var sent gatewaytest.CallResult
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sent = p.Call("bridge_send", map[string]any{"target": "w@" + hostB, "message": "Trace me.", "wait_s": 8})
	}()
	gatewaytest.Eventually(t, 10*time.Second, "the brief submitted in B's pane", func() bool { return len(fake.Submitted(pane)) == 1 })
	w.MustStatus("bridge_send", map[string]any{"target": "lead@" + hostA, "message": "traced"}, "confirmed")
	wg.Wait()
	if sent.Status != "replied" || sent.TraceID == "" || sent.MsgID == "" {
		t.Fatalf("brief: %+v %s", sent.Result, sent.Text)
	}

	// what must come before what: causally, on one machine's clock (the
	// inject hop is stamped when the typing is done, so the worker's reply
	// may be sent before it)
	chains := [][]string{
		{hostA + ":SEND:publish", hostB + ":SEND:accept", hostB + ":SEND:queue"},
		{hostB + ":SEND:accept", hostB + ":SEND:inject"},
		{hostB + ":SEND:accept", hostB + ":REPLY:publish", hostA + ":REPLY:accept"},
		{hostB + ":INJECTED:publish", hostA + ":INJECTED:accept"},
	}
	missing := func(rep *bridge.TraceReport, tl []bridge.TraceHop) string {
		for _, h := range rep.Hosts {
			if h.Error != "" {
				return h.Host + ": " + h.Error
			}
		}
		for _, c := range chains {
			if s := wantInOrder(tl, c...); s != "" {
				return s
			}
		}
		return ""
	}
	var rep *bridge.TraceReport
	var tl []bridge.TraceHop
	for deadline := time.Now().Add(30 * time.Second); ; {
		rep = askTrace(t, ga, sent.TraceID, 10*time.Second)
		tl = rep.Timeline()
		m := missing(rep, tl)
		if m == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("trace of the conversation: %s%s", m, timelineText(tl))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(rep.Hosts) != 3 || rep.Hosts[0].Host != hostA {
		t.Fatalf("hosts: %+v", rep.Hosts)
	}
	for _, h := range rep.Hosts {
		if h.Error != "" || !h.Scope.Whole || (h.Host == hostC) != (len(h.Hops) == 0) {
			t.Errorf("host %s: %d hops, scope %+v, error %q", h.Host, len(h.Hops), h.Scope, h.Error)
		}
	}
	seenMsg := map[string]bool{}
	for _, h := range tl {
		if h.TraceID != sent.TraceID && h.MsgID != sent.MsgID && h.Hop != bridge.HopInject {
			t.Errorf("hop of another trace: %+v", h)
		}
		if (h.SinceMs == nil) != !seenMsg[h.MsgID] || h.SinceMs != nil && *h.SinceMs < 0 {
			t.Errorf("%s %s %s: sinceMs %v", h.Seen, h.Kind, h.Hop, h.SinceMs)
		}
		seenMsg[h.MsgID] = true
	}
	if rep.Names[p.GID(t, ga)] != "lead@"+hostA || rep.Names[w.GID(t, gb)] != "w@"+hostB {
		t.Errorf("names %v", rep.Names)
	}
	t.Logf("trace %s:%s", sent.TraceID, timelineText(tl))

	// by the brief's msgId: the brief, and by corr its receipt and reply
	byMsgRep := askTrace(t, ga, sent.MsgID, 10*time.Second)
	if m := missing(byMsgRep, byMsgRep.Timeline()); m != "" {
		t.Fatalf("trace of the brief's msgId: %s%s", m, timelineText(byMsgRep.Timeline()))
	}

	// an id nobody has seen: found nowhere, and each host says what it searched
	none := askTrace(t, ga, uuid.NewString(), 10*time.Second)
	if err := none.NotFound(); err == nil || !strings.Contains(err.Error(), "no hops found") || !strings.Contains(err.Error(), hostB+" (its whole audit log") {
		t.Fatalf("unknown id: %v", err)
	}

	// C's gateway stops; A still has its presence: C does not answer
	gc.Close()
	start := time.Now()
	rep = askTrace(t, ga, sent.TraceID, 1500*time.Millisecond)
	took := time.Since(start)
	var c bridge.TraceHost
	for _, h := range rep.Hosts {
		if h.Host == hostC {
			c = h
		}
	}
	if !strings.Contains(c.Error, "no answer within 1.5s") || len(rep.Timeline()) != len(tl) {
		t.Fatalf("host C gone: %+v; %d hops, want %d", c, len(rep.Timeline()), len(tl))
	}
	t.Logf("trace with host C gone returned in %v", took.Round(time.Millisecond))
}

// TestTraceRefusedFromStrangers: a TRACE signed for a host nobody trusts,
// or sent by an entity instead of its gateway, is refused like any
// control message, and nothing is answered.
func TestTraceRefusedFromStrangers(t *testing.T) {
	url := brokerURL(t)
	hostA, hostB := gatewaytest.UniqueHost("ra"), gatewaytest.UniqueHost("rb")
	ga := gatewaytest.StartHost(t, hostA, url)
	gb := gatewaytest.StartHost(t, hostB, url)
	lead := gatewaytest.RegisterOn(t, ga, "lead", bridge.RolePrimary)
	gatewaytest.Eventually(t, 10*time.Second, "B sees lead", func() bool { _, err := gb.Core().Resolve("lead@" + hostA); return err == nil })
	ka, err := keys.Load(filepath.Join(ga.StateDir(), keys.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	ct := ga.Transport().(bridge.ControlTransport)
	send := func(host, from string) string {
		now := time.Now()
		env := &bridge.Envelope{V: bridge.Version, Kind: bridge.KindTrace, MsgID: uuid.NewString(), From: from, To: "control." + hostB,
			Host: host, TS: now, ExpiresAt: now.Add(time.Minute), Body: []byte(`{"id":"` + uuid.NewString() + `"}`)}
		env.Sig = ka.Sign(env.SigningInput())
		if err := ct.PublishControl(context.Background(), hostB, env); err != nil {
			t.Fatal(err)
		}
		return env.MsgID
	}
	stranger := send("stranger-"+hostA, bridge.GatewayGID("stranger-"+hostA)) // signed by A's key, claiming a host nobody trusts
	entity := send(hostA, lead.GID)                                           // A's key, but an entity, not A's gateway
	for id, reason := range map[string]string{stranger: bridge.RefuseUnknownHost, entity: bridge.RefuseFromNotOnHost} {
		// B's own trace of the TRACE shows the refusal, and nothing answered it
		var tl []bridge.TraceHop
		gatewaytest.Eventually(t, 10*time.Second, "the TRACE refused on B: "+reason, func() bool {
			tl = askTrace(t, gb, id, 5*time.Second).Timeline()
			return hopIndex(tl, hostB, bridge.KindTrace, bridge.HopRefuse) >= 0
		})
		h := tl[hopIndex(tl, hostB, bridge.KindTrace, bridge.HopRefuse)]
		if h.Verdict != "refused: "+reason {
			t.Errorf("TRACE %s: %q, want refused: %s", id, h.Verdict, reason)
		}
		for _, h := range tl {
			if h.Kind == bridge.KindTraceAnswer {
				t.Errorf("TRACE %s was answered: %+v", id, h)
			}
		}
	}
	// A's own gateway is answered: B is not refusing everything
	rep := askTrace(t, ga, uuid.NewString(), 5*time.Second)
	for _, h := range rep.Hosts {
		if h.Error != "" {
			t.Fatalf("host %s: %s", h.Host, h.Error)
		}
	}
}
