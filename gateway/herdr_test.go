package gateway_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/herdr"
	"github.com/herdbridge/herdbridge/herdr/herdrtest"
)

// startHerdrGateway runs a gateway wired to a fake herdr.
func startHerdrGateway(t testing.TB, fake *herdrtest.Server, tune func(*gateway.Config)) *gateway.Gateway {
	t.Helper()
	cfg := gatewaytest.HerdrConfig(t, fake)
	if tune != nil {
		tune(&cfg)
	}
	return gatewaytest.Start(t, cfg)
}

// TestHerdrBriefAndReply: a primary's brief appears in the worker's pane,
// the worker's own herdbridge mcp (with HERDR_PANE_ID) replies, and the
// primary's open send resolves.
func TestHerdrBriefAndReply(t *testing.T) {
	fake := herdrtest.New(t)
	pane := fake.AddAgent(herdrtest.PaneOptions{Agent: "claude"})
	g := startHerdrGateway(t, fake, nil)
	p := gatewaytest.HTTPConn(t, g, "lead", "primary")
	w := gatewaytest.PaneConn(t, g, "worker-1", "worker", pane)
	var sent gatewaytest.CallResult
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sent = p.Call("bridge_send", map[string]any{"target": "worker-1", "message": "Fix the flaky test.\nThen report.", "wait_s": 8})
	}()
	gatewaytest.Eventually(t, 5*time.Second, "the brief submitted in the worker's pane", func() bool { return len(fake.Submitted(pane)) == 1 })
	got := fake.Submitted(pane)[0]
	if !strings.Contains(got, "Brief from lead") || !strings.Contains(got, "Fix the flaky test.\nThen report.") {
		t.Fatalf("submitted prompt %q", got)
	}
	w.MustStatus("bridge_send", map[string]any{"target": "lead", "message": "fixed"}, "confirmed")
	wg.Wait()
	if sent.Status != "replied" || sent.Messages[0].Body != "fixed" {
		t.Fatalf("open send: %+v (%s)", sent.Result, sent.Text)
	}
	// the worker asks back: its default target is the brief's sender
	if r := w.Call("bridge_ask", map[string]any{"question": "more?"}); r.Status != "no_waiter" {
		t.Fatalf("ask: %+v", r.Result)
	}
}

// TestHerdrReceipts: each scenario's send returns exactly the rung observed.
func TestHerdrReceipts(t *testing.T) {
	cases := []struct {
		name   string
		setup  func(f *herdrtest.Server, pane string)
		status string
		reason string
		check  func(t *testing.T, f *herdrtest.Server, pane string)
	}{
		{name: "idle", status: "submitted", check: func(t *testing.T, f *herdrtest.Server, pane string) {
			if n := len(f.Submitted(pane)); n != 1 {
				t.Fatalf("%d turns", n)
			}
		}},
		{name: "busy", setup: func(f *herdrtest.Server, pane string) { f.SetStatus(pane, "working") },
			status: "queued", reason: "w is working in pane " /* then typed: TestPaneQueueBusyWorker */},
		{name: "blocked-dialog", setup: func(f *herdrtest.Server, pane string) { f.SetBlocked(pane, true) },
			status: "queued", reason: "waits on a dialog", check: func(t *testing.T, f *herdrtest.Server, pane string) {
				if d := f.TypedIntoDialog(pane); len(d) != 0 {
					t.Fatalf("typed into the dialog: %q", d)
				}
				if s := f.Submitted(pane); len(s) != 0 {
					t.Fatalf("submitted %q", s)
				}
			}},
		{name: "draft-in-composer", setup: func(f *herdrtest.Server, pane string) { f.SetDraft(pane, "half-typed thought") },
			status: "queued", reason: "unsent draft", check: func(t *testing.T, f *herdrtest.Server, pane string) {
				if c := f.Composer(pane); c != "half-typed thought" {
					t.Fatalf("composer now %q", c)
				}
			}},
		{name: "swallowed-enter", setup: func(f *herdrtest.Server, pane string) { f.SwallowEnters(pane, 1) },
			status: "submitted", reason: "Enter retry", check: func(t *testing.T, f *herdrtest.Server, pane string) {
				if n := len(f.Submitted(pane)); n != 1 {
					t.Fatalf("%d turns", n)
				}
			}},
		{name: "enter-swallowed-twice", setup: func(f *herdrtest.Server, pane string) { f.SwallowEnters(pane, 2) },
			status: "uncertain", reason: "not seen starting", check: func(t *testing.T, f *herdrtest.Server, pane string) {
				// then recovered from the composer: TestPaneQueueOwnDraftRecovery
				if n := writesWith(f, pane, "Fix it"); n != 1 {
					t.Fatalf("re-pasted: the brief written %d times", n)
				}
			}},
		{name: "enter-swallowed-twice-user-looks", setup: func(f *herdrtest.Server, pane string) {
			// a user focusing the pane raises state_change_seq (done to idle):
			// that is no turn starting, and must not read as submitted
			f.SwallowEnters(pane, 2)
			go func() { time.Sleep(600 * time.Millisecond); f.SetSeen(pane, true) }()
		}, status: "uncertain", check: func(t *testing.T, f *herdrtest.Server, pane string) {
			if n := writesWith(f, pane, "Fix it"); n != 1 {
				t.Fatalf("the brief written %d times", n)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := herdrtest.New(t)
			pane := fake.AddAgent(herdrtest.PaneOptions{Agent: "claude"})
			g := startHerdrGateway(t, fake, nil)
			p := gatewaytest.HTTPConn(t, g, "lead", "primary")
			gatewaytest.PaneConn(t, g, "w", "worker", pane)
			if tc.setup != nil {
				tc.setup(fake, pane)
			}
			r := p.Call("bridge_send", map[string]any{"target": "w", "message": "Fix it"})
			if r.IsError || r.Status != tc.status || !strings.Contains(r.Reason, tc.reason) {
				t.Fatalf("receipt %q reason %q (%s); want %q with %q", r.Status, r.Reason, r.Text, tc.status, tc.reason)
			}
			if tc.check != nil {
				tc.check(t, fake, pane)
			}
		})
	}
}

// TestHerdrOldProtocol: a server before agent.prompt (protocol 16) gets
// pane.send_input and polling, with the same receipts.
func TestHerdrOldProtocol(t *testing.T) {
	fake := herdrtest.New(t, herdrtest.WithProtocol(16))
	pane := fake.AddAgent(herdrtest.PaneOptions{Agent: "claude"})
	g := startHerdrGateway(t, fake, nil)
	p := gatewaytest.HTTPConn(t, g, "lead", "primary")
	gatewaytest.PaneConn(t, g, "w", "worker", pane)
	r := p.MustStatus("bridge_send", map[string]any{"target": "w", "message": "old server"}, "submitted")
	_ = r
	for _, req := range fake.Requests() {
		if strings.Contains(req, `"agent.prompt"`) || strings.Contains(req, `"agent.wait"`) {
			t.Fatalf("sent a method protocol 16 lacks: %s", req)
		}
	}
}

// TestHerdrNotRunning: a brief for a pane whose herdr is not running waits
// in the pane's queue (a herdr restart must not fail every queued brief);
// the sender is told why, with how to start herdr.
func TestHerdrNotRunning(t *testing.T) {
	g := startHerdrGateway(t, nil, nil)
	p := gatewaytest.HTTPConn(t, g, "lead", "primary")
	gatewaytest.PaneConn(t, g, "w", "worker", "w1:p1")
	r := p.Call("bridge_send", map[string]any{"target": "w", "message": "hello"})
	if r.Status != "queued" || !strings.Contains(r.Reason, "herdr is not running") || !strings.Contains(r.Reason, "start it with") {
		t.Fatalf("receipt %q %q", r.Status, r.Reason)
	}
}

// TestHerdrLiveStatusAndClose: the roster shows the pane's live status; a
// closed pane turns the primary's open send into abandoned and removes the
// worker.
func TestHerdrLiveStatusAndClose(t *testing.T) {
	fake := herdrtest.New(t)
	pane := fake.AddAgent(herdrtest.PaneOptions{Agent: "claude"})
	g := startHerdrGateway(t, fake, nil)
	p := gatewaytest.HTTPConn(t, g, "lead", "primary")
	gatewaytest.PaneConn(t, g, "w", "worker", pane)
	status := func() string {
		for _, e := range g.Core().Roster().Entities {
			if e.Name == "w" {
				return e.Status
			}
		}
		return "(gone)"
	}
	fake.SetStatus(pane, "working")
	gatewaytest.Eventually(t, 5*time.Second, "roster shows working", func() bool { return status() == "working" })
	fake.SetStatus(pane, "idle")
	gatewaytest.Eventually(t, 5*time.Second, "roster shows idle", func() bool { return status() == "idle" })

	done := make(chan gatewaytest.CallResult, 1)
	go func() {
		done <- p.Call("bridge_send", map[string]any{"target": "w", "message": "long task", "wait_s": 8})
	}()
	gatewaytest.Eventually(t, 5*time.Second, "brief submitted", func() bool { return len(fake.Submitted(pane)) == 1 })
	fake.ClosePane(pane)
	r := <-done
	if r.Status != "abandoned" {
		t.Fatalf("open send after the pane closed: %+v (%s)", r.Result, r.Text)
	}
	gatewaytest.Eventually(t, 5*time.Second, "worker removed", func() bool { return status() == "(gone)" })
	if r := p.Call("bridge_send", map[string]any{"target": "w", "message": "x"}); !r.IsError {
		t.Fatalf("send to a removed worker: %+v", r.Result)
	}
}

// TestHerdrNudgesPrimaryInPane: replies held for an idle primary in a pane
// with no waiter get a one-line reminder typed into its pane, once per
// backoff, never while one is outstanding.
func TestHerdrNudgesPrimaryInPane(t *testing.T) {
	fake := herdrtest.New(t)
	ppane := fake.AddAgent(herdrtest.PaneOptions{Agent: "claude"})
	g := startHerdrGateway(t, fake, nil)
	gatewaytest.PaneConn(t, g, "lead", "primary", ppane)
	w := gatewaytest.HTTPConn(t, g, "w", "worker")
	w.MustStatus("bridge_send", map[string]any{"target": "lead", "message": "done 1"}, "confirmed")
	gatewaytest.Eventually(t, 5*time.Second, "a reminder typed", func() bool { return len(fake.Submitted(ppane)) >= 1 })
	if s := fake.Submitted(ppane)[0]; !strings.Contains(s, "1 message(s) held") || !strings.Contains(s, "bridge_poll") {
		t.Fatalf("reminder %q", s)
	}
	time.Sleep(300 * time.Millisecond) // inside the backoff: nothing more
	if n := len(fake.Submitted(ppane)); n != 1 {
		t.Fatalf("%d reminders inside the backoff", n)
	}
	// still held, nobody polls: reminded again once the backoff (500 ms) ends
	gatewaytest.Eventually(t, 5*time.Second, "a second reminder after the backoff", func() bool { return len(fake.Submitted(ppane)) >= 2 })
	// drained: no more reminders
	p := gatewaytest.PaneConn(t, g, "lead", "primary", ppane)
	p.MustStatus("bridge_poll", map[string]any{}, "drained")
	n := len(fake.Submitted(ppane))
	time.Sleep(2500 * time.Millisecond) // past the next backoff (1 s, then 2 s)
	if m := len(fake.Submitted(ppane)); m != n {
		t.Fatalf("%d more reminders after the primary drained", m-n)
	}
}

// TestHerdrNudgeOff: pane nudges can be turned off.
func TestHerdrNudgeOff(t *testing.T) {
	fake := herdrtest.New(t)
	ppane := fake.AddAgent(herdrtest.PaneOptions{Agent: "claude"})
	off := false
	g := startHerdrGateway(t, fake, func(c *gateway.Config) { c.File.Herdr.PaneNudge = &off })
	gatewaytest.PaneConn(t, g, "lead", "primary", ppane)
	w := gatewaytest.HTTPConn(t, g, "w", "worker")
	w.MustStatus("bridge_send", map[string]any{"target": "lead", "message": "done"}, "confirmed")
	time.Sleep(time.Second)
	if n := len(fake.Submitted(ppane)); n != 0 {
		t.Fatalf("%d reminders with nudges off", n)
	}
}

// TestHerdrSpawn: bridge_spawn starts a profile in a new pane, returns when
// the agent is ready and registered with spawnId as its gid, then delivers
// the brief through the forward path.
func TestHerdrSpawn(t *testing.T) {
	fake := herdrtest.New(t)
	fake.AddAgent(herdrtest.PaneOptions{Agent: "claude"}) // a workspace to spawn into
	g := startHerdrGateway(t, fake, func(c *gateway.Config) {
		c.File.Profiles = map[string]herdr.Profile{
			"reviewer": {Kind: "claude", Args: []string{"--model", "opus"}, Cwd: "/tmp", Groups: []string{"review"}},
		}
	})
	p := gatewaytest.HTTPConn(t, g, "lead", "primary")
	roster := p.Call("bridge_roster", nil)
	if !strings.Contains(roster.Text, "reviewer") {
		t.Fatalf("roster does not list the profile: %s", roster.Text)
	}
	if r := p.Call("bridge_spawn", map[string]any{"profile": "nope"}); !r.IsError || !strings.Contains(r.Text, "reviewer") {
		t.Fatalf("unknown profile: %+v %s", r.Result, r.Text)
	}
	if r := p.Call("bridge_spawn", map[string]any{"profile": "reviewer", "host": "elsewhere"}); !r.IsError {
		t.Fatalf("remote host: %+v", r.Result)
	}
	r := p.Call("bridge_spawn", map[string]any{"profile": "reviewer", "name": "rev-1", "brief": "Review the diff."})
	if r.IsError || r.Status != "submitted" || r.SpawnID == "" {
		t.Fatalf("spawn: %+v %s", r.Result, r.Text)
	}
	e, err := g.Core().Resolve("rev-1")
	if err != nil || e.GID != r.SpawnID || e.PaneID == "" || len(e.Groups) != 1 {
		t.Fatalf("spawned entity %+v (%v), spawnId %s", e, err, r.SpawnID)
	}
	if s := fake.Submitted(e.PaneID); len(s) != 1 || !strings.Contains(s[0], "Review the diff.") {
		t.Fatalf("brief in the new pane: %q", s)
	}
	if r := p.Call("bridge_spawn", map[string]any{"profile": "reviewer", "name": "rev-1"}); !r.IsError {
		t.Fatalf("a second spawn with a taken name: %+v", r.Result)
	}
	// spawn_id makes a retried spawn idempotent, even when both run at once
	panes := len(fake.PaneIDs())
	id := "7b0e8a52-3c1d-4f6e-9a2b-1c2d3e4f5a6b"
	var wg sync.WaitGroup
	results := make([]gatewaytest.CallResult, 2)
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results[i] = p.Call("bridge_spawn", map[string]any{"profile": "reviewer", "name": "rev-2", "spawn_id": id})
		}(i)
	}
	wg.Wait()
	for _, r := range results {
		if r.IsError || r.SpawnID != id {
			t.Fatalf("idempotent spawn: %+v %s", r.Result, r.Text)
		}
	}
	if n := len(fake.PaneIDs()) - panes; n != 1 {
		t.Fatalf("the same spawn_id twice opened %d panes", n)
	}
}

// TestHerdrSpawnNeverReady: an agent stuck behind a dialog is a failed spawn
// that names the status it was stuck in, and its pane is closed.
func TestHerdrSpawnNeverReady(t *testing.T) {
	fake := herdrtest.New(t, herdrtest.WithStartDelay(time.Hour))
	fake.AddAgent(herdrtest.PaneOptions{Agent: "claude"})
	g := startHerdrGateway(t, fake, func(c *gateway.Config) {
		c.File.Profiles = map[string]herdr.Profile{"slow": {Kind: "claude"}}
		c.File.Herdr.SpawnReadyWait = gateway.Duration(time.Second)
	})
	p := gatewaytest.HTTPConn(t, g, "lead", "primary")
	before := len(fake.PaneIDs())
	r := p.Call("bridge_spawn", map[string]any{"profile": "slow", "name": "s1"})
	if r.Status != "failed" || !strings.Contains(r.Reason, "stuck in") {
		t.Fatalf("spawn: %+v %s", r.Result, r.Text)
	}
	if _, err := g.Core().Resolve("s1"); err == nil {
		t.Fatal("a failed spawn registered an entity")
	}
	gatewaytest.Eventually(t, 3*time.Second, "the stuck pane closed", func() bool { return len(fake.PaneIDs()) == before })
}

// TestHerdrSpawnBounded: a spawn lists its phases; past the profile's
// maxWorkers it is refused at once, naming the limit and the count; a cwd
// outside the profile's roots is refused.
func TestHerdrSpawnBounded(t *testing.T) {
	fake := herdrtest.New(t)
	fake.AddAgent(herdrtest.PaneOptions{Agent: "claude"})
	root := t.TempDir()
	g := startHerdrGateway(t, fake, func(c *gateway.Config) {
		c.File.MaxWorkers = 5
		c.File.Profiles = map[string]herdr.Profile{
			"reviewer": {Kind: "claude", ProfilePolicy: bridge.ProfilePolicy{MaxWorkers: 1, Roots: []string{root}}},
		}
	})
	p := gatewaytest.HTTPConn(t, g, "lead", "primary")
	if r := p.Call("bridge_spawn", map[string]any{"profile": "reviewer", "name": "out", "cwd": "/etc"}); !r.IsError || !strings.Contains(r.Text, "outside profile reviewer's roots") {
		t.Fatalf("cwd outside the roots: %+v %s", r.Result, r.Text)
	}
	r := p.Call("bridge_spawn", map[string]any{"profile": "reviewer", "name": "rev-1", "cwd": root, "brief": "Review it."})
	if r.IsError || r.Status != "submitted" {
		t.Fatalf("spawn: %+v %s", r.Result, r.Text)
	}
	var phases []string
	for _, ph := range r.Phases {
		phases = append(phases, ph.Phase)
	}
	want := []string{bridge.PhasePaneCreated, bridge.PhaseAgentStarted, bridge.PhaseReady, bridge.PhaseRegistered, bridge.PhaseBriefTyped}
	if strings.Join(phases, ",") != strings.Join(want, ",") || !strings.Contains(r.Text, "phases: pane created") {
		t.Fatalf("phases %q, want %q (%s)", phases, want, r.Text)
	}
	before := len(fake.PaneIDs())
	if r := p.Call("bridge_spawn", map[string]any{"profile": "reviewer", "name": "rev-2"}); !r.IsError ||
		!strings.Contains(r.Text, "maxWorkers limit is 1") || !strings.Contains(r.Text, "runs 1") {
		t.Fatalf("spawn past maxWorkers: %+v %s", r.Result, r.Text)
	}
	if n := len(fake.PaneIDs()); n != before {
		t.Fatalf("a refused spawn opened %d pane(s)", n-before)
	}
}
