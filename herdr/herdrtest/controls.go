package herdrtest

import (
	"fmt"
	"time"
)

// Controls and accessors for tests. Each takes effect at once, wakes every
// waiting request, and panics when given a pane id that does not exist
// (a bug in the test).

// PaneOptions describes a pane to add with AddPane or AddAgent.
type PaneOptions struct {
	// Workspace is an existing workspace id to add the pane to. Empty means
	// the focused workspace; a workspace "w1" is created if there is none.
	Workspace string
	// NewWorkspace puts the pane in a new workspace (with a new tab).
	NewWorkspace bool
	// NewTab puts the pane in a new tab of the chosen workspace.
	NewTab bool
	// Cwd is reported as the pane's cwd (omitted when empty).
	Cwd string
	// Label is the pane's manual label (omitted when empty).
	Label string
	// Focus makes this the UI-focused pane (and marks it seen).
	Focus bool
	// BracketedPaste says whether the app in the pane enabled mode 2004.
	// Shell panes default to false (plain sh). Agents always enable it
	// unless NoBracketedPaste is set.
	BracketedPaste   bool
	NoBracketedPaste bool
	// Busy makes the shell's foreground group hold another process, so
	// agent.start answers agent_pane_busy (as while rc files still run).
	Busy bool
	// Lines is the pane's initial scrollback.
	Lines []string
	// Shell, for shell panes, maps a submitted command line to its output
	// lines. Without it the shell only knows `echo`, `exit` and the agent
	// executables (which launch that agent).
	Shell func(cmd string) []string

	// Agent is the agent kind label ("claude", "codex", …) for AddAgent;
	// AddAgent defaults it to "claude". A label herdr does not know (e.g.
	// "my-agent") makes a custom agent: agent.prompt answers agent_not_ready.
	Agent string
	// Name is the agent's unique name (omitted when empty).
	Name string
	// Status is the initial agent_status (default "done", or "idle" when
	// Seen or Focus is set).
	Status string
	// Seen marks the pane as seen in a UI: finished turns end idle, not done.
	Seen bool
	// Managed marks the agent as launched by agent.start, so it reports
	// interactive_ready once its launch is over.
	Managed bool
	// LaunchPending starts the agent in launch_pending; it stays there until
	// SetLaunchPending(id, false).
	LaunchPending bool
	// Reply maps a submitted prompt to the transcript lines printed when its
	// turn ends (default "● Done."). Shell and Reply run with the server's
	// lock held: they must not call methods of the Server.
	Reply func(prompt string) string
	// Draft is text already sitting in the composer.
	Draft string
}

func (s *Server) paneLocked(id string) *pane {
	p := s.panes[id]
	if p == nil {
		panic(fmt.Sprintf("herdrtest: no pane %q", id))
	}
	return p
}

func (s *Server) findPaneLocked(id string) *pane {
	return s.everPanes[id]
}

// AddPane adds a shell pane (agent_status "unknown") and returns its id,
// e.g. "w1:p1". Ids are opaque to clients. pane_created (and, when new,
// workspace_created / tab_created) go into the event ring.
func (s *Server) AddPane(opts PaneOptions) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addPaneLocked(opts).id
}

// AddAgent adds a pane that hosts an agent (kind opts.Agent, default
// "claude") and returns its pane id.
func (s *Server) AddAgent(opts PaneOptions) string {
	if opts.Agent == "" {
		opts.Agent = "claude"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addPaneLocked(opts).id
}

func (s *Server) addPaneLocked(o PaneOptions) *pane {
	var ws *workspace
	var newWS *workspace
	var newTab *tab
	switch {
	case o.NewWorkspace:
		ws = s.newWorkspaceLocked("")
		newWS = ws
	case o.Workspace != "":
		if ws = s.workspaceLocked(o.Workspace); ws == nil {
			panic(fmt.Sprintf("herdrtest: no workspace %q", o.Workspace))
		}
	default:
		if ws = s.focusedWS; ws == nil {
			ws = s.newWorkspaceLocked("")
			newWS = ws
		}
	}
	t := ws.activeTab
	if t == nil || o.NewTab || newWS != nil {
		t = s.newTabLocked(ws, "")
		newTab = t
	}
	p := s.newPaneLocked(t, o.Cwd)
	p.label = o.Label
	p.bracketed = o.BracketedPaste
	p.busy = o.Busy
	p.shell = o.Shell
	p.lines = append(p.lines, o.Lines...)
	p.composer = o.Draft
	p.seen = o.Seen || o.Focus
	if o.Focus {
		s.focusedWS, ws.activeTab, t.active = ws, t, p
	}
	if o.Agent != "" {
		p.agent = o.Agent
		_, p.known = agentExecutables[o.Agent]
		p.name = o.Name
		p.managed = o.Managed
		p.reply = o.Reply
		p.shellBPM = p.bracketed
		p.bracketed = !o.NoBracketedPaste
		p.occupant = 1
		p.pending = o.LaunchPending
		switch {
		case o.LaunchPending:
			p.state = "unknown"
		case o.Status == "" || o.Status == "idle" || o.Status == "done":
			p.state = "idle"
			if o.Status == "done" {
				p.seen = false
			} else if o.Status == "idle" {
				p.seen = true
			}
		default:
			p.state = o.Status
		}
		p.ready = o.Managed && !o.LaunchPending
		if p.state == "working" {
			p.queue = []string{""}
			s.scheduleTurnEndLocked(p)
		}
	}
	s.emitCreatedLocked(newWS, newTab, p)
	if p.agent != "" {
		s.emitLocked("pane_agent_detected", p.id, "", obj{{"pane_id", p.id}, {"workspace_id", p.ws.id}, {"agent", p.agent}})
	}
	s.notifyLocked()
	return p
}

// SetStatus sets a pane's agent_status: "idle" (seen), "done" (idle and
// unseen), "working", "blocked" or "unknown". A change bumps
// state_change_seq and emits pane_agent_status_changed. "working" set this
// way never ends on its own; "idle"/"done" drop any running turn.
func (s *Server) SetStatus(paneID, status string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.paneLocked(paneID)
	p.turnGen++
	switch status {
	case "idle":
		p.queue = nil
		s.setStateLocked(p, "idle", true)
	case "done":
		p.queue = nil
		s.setStateLocked(p, "idle", false)
	case "working", "blocked", "unknown":
		s.setStateLocked(p, status, p.seen)
	default:
		panic(fmt.Sprintf("herdrtest: unknown agent status %q", status))
	}
}

// SetSeen marks a pane as seen (idle) or unseen (done) in a UI.
func (s *Server) SetSeen(paneID string, seen bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.paneLocked(paneID)
	s.setStateLocked(p, p.state, seen)
}

// SetBlocked opens (true) or answers (false) a permission dialog. While it is
// open the status is "blocked", Enter does nothing, and any text written to
// the pane is recorded by TypedIntoDialog instead of reaching the composer.
// Closing it restores the previous state; a turn that was running resumes.
func (s *Server) SetBlocked(paneID string, blocked bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.paneLocked(paneID)
	if blocked == (p.state == "blocked") {
		return
	}
	if blocked {
		p.preBlock = p.state
		p.turnGen++
		s.setStateLocked(p, "blocked", p.seen)
		return
	}
	prev := p.preBlock
	if prev == "" || prev == "blocked" {
		prev = "idle"
	}
	s.setStateLocked(p, prev, p.seen)
	if prev == "working" {
		s.scheduleTurnEndLocked(p)
	}
}

// SetDraft puts text in the composer, as if the user had typed it and not
// submitted. A prompt typed afterwards is appended: the submitted turn is
// draft+text.
func (s *Server) SetDraft(paneID, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.paneLocked(paneID)
	p.composer = text
	p.revision++
	s.notifyLocked()
}

// SwallowEnters makes the next n Enter keys written to the pane vanish: the
// text stays in the composer and the status does not change.
func (s *Server) SwallowEnters(paneID string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.paneLocked(paneID).swallow = n
}

// IgnoreEscape makes the pane's agent ignore a lone Escape (a custom
// agent without that binding, or one stuck unwinding a tool call): its
// turn keeps running.
func (s *Server) IgnoreEscape(paneID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.paneLocked(paneID).deafToEscape = true
}

// SetBracketedPaste sets whether the pane's app enabled bracketed paste.
func (s *Server) SetBracketedPaste(paneID string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.paneLocked(paneID).bracketed = on
}

// SetBusy sets whether the pane's shell has a foreground child (agent.start
// then answers agent_pane_busy).
func (s *Server) SetBusy(paneID string, busy bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.paneLocked(paneID).busy = busy
}

// SetLaunchPending sets launch_pending. Ending a launch makes the agent idle
// (done when unseen) and, for managed agents, interactive_ready.
func (s *Server) SetLaunchPending(paneID string, pending bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.paneLocked(paneID)
	if p.agent == "" || p.pending == pending {
		return
	}
	p.pending = pending
	p.revision++
	if pending {
		p.ready = false
		s.setStateLocked(p, "unknown", p.seen)
		return
	}
	p.ready = p.managed
	s.setStateLocked(p, "idle", p.seen)
}

// AppendOutput prints lines to the pane's scrollback (visible in reads and
// matched by pane.wait_for_output / pane.output_matched).
func (s *Server) AppendOutput(paneID string, lines ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.paneLocked(paneID)
	p.lines = append(p.lines, lines...)
	p.revision++
	s.notifyLocked()
}

// FinishTurn ends the running turn of an agent now (use with a zero turn
// duration for fully manual control).
func (s *Server) FinishTurn(paneID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.paneLocked(paneID)
	if p.state == "working" {
		s.finishTurnLocked(p)
	}
}

// ClosePane closes a pane as pane.close does: pane_closed (and tab_closed /
// workspace_closed when it was the last) is emitted and waits on it end
// with agent_not_running.
func (s *Server) ClosePane(paneID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removePaneLocked(s.paneLocked(paneID), "pane_closed")
}

// ExitPane simulates the pane's process dying: herdr removes the pane and
// emits pane_exited followed by layout_updated (no pane_closed).
func (s *Server) ExitPane(paneID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removePaneLocked(s.paneLocked(paneID), "pane_exited")
}

// ExitAgent simulates the agent process exiting back to the shell: the pane
// stays, its agent is gone, and waits on it end with agent_not_running.
// An agent that is the pane's own command (layout.apply) has no shell to
// return to: its pane exits as with ExitPane.
func (s *Server) ExitAgent(paneID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.paneLocked(paneID)
	if p.command != nil {
		s.removePaneLocked(p, "pane_exited")
		return
	}
	s.exitAgentLocked(p)
}

// FocusPane focuses the pane in the "UI" (marks it seen, done → idle).
func (s *Server) FocusPane(paneID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.focusLocked(s.paneLocked(paneID))
}

// SetTurnDuration sets how long future turns take (0: until FinishTurn).
func (s *Server) SetTurnDuration(d time.Duration) { s.set(func() { s.turnDuration = d }) }

// SetSubmitDelay sets agent.prompt's delay between text and Enter.
func (s *Server) SetSubmitDelay(d time.Duration) { s.set(func() { s.submitDelay = d }) }

// SetStartDelay sets how long future launches stay launch_pending.
func (s *Server) SetStartDelay(d time.Duration) { s.set(func() { s.startDelay = d }) }

// SetStallTimeout sets agent.prompt's activity gate (herdr: 5 s).
func (s *Server) SetStallTimeout(d time.Duration) { s.set(func() { s.stallTimeout = d }) }

// SetTrustDialog makes future agent launches (agent.start, and agent
// commands of layout.apply) come up blocked on a dialog — as an agent does
// in a directory it does not trust yet — instead of idle. Answer it with
// SetBlocked(id, false); the agent is then idle (done while unseen).
func (s *Server) SetTrustDialog(on bool) { s.set(func() { s.trustDialog = on }) }

// SetShellStartup sets how long the shells of future API-created panes
// stay busy running rc files (see WithShellStartup; 0: never).
func (s *Server) SetShellStartup(d time.Duration) { s.set(func() { s.shellStartup = d }) }

// SendRawEvent writes line plus a newline, as is, to every events.subscribe
// stream open now, at its next poll. It is not validated and does not enter
// the event ring: use it to feed a client an event line herdr would never
// send (garbage, an unknown event) and check that it copes.
func (s *Server) SendRawEvent(line []byte) {
	s.set(func() {
		s.rawEvents = append(s.rawEvents, append([]byte(nil), line...))
		s.notifyLocked()
	})
}

// SetProtocol changes the protocol ping reports (and the version, to that
// release's, when known) and gates methods accordingly: below 17 there is no
// agent.prompt, agent.wait or agent.send_keys (invalid_request "unknown
// variant"), so clients must fall back to pane.send_input plus polling;
// below 20 agent.prompt has no blocked guard and types into the dialog.
func (s *Server) SetProtocol(n int) {
	s.set(func() {
		s.protocol = n
		if v, ok := releaseVersions[n]; ok {
			s.version = v
		}
	})
}

// SetVersion sets the version string ping reports.
func (s *Server) SetVersion(v string) { s.set(func() { s.version = v }) }

func (s *Server) set(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}

// InjectFault alters the reply to the next request for method ("" = any
// method) — see Fault. Faults queue up in order.
func (s *Server) InjectFault(method string, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, fault{method: method, f: f})
}

// GarbleNextReply makes the next reply for method an unparsable line.
func (s *Server) GarbleNextReply(method string) { s.InjectFault(method, Fault{Garbage: true}) }

// DelayNextReply holds the next reply for method back by d.
func (s *Server) DelayNextReply(method string, d time.Duration) {
	s.InjectFault(method, Fault{Delay: d})
}

// DropNextReply closes the next connection for method without a reply.
func (s *Server) DropNextReply(method string) { s.InjectFault(method, Fault{Drop: true}) }

// FailNextReply answers the next request for method with this error
// without running it.
func (s *Server) FailNextReply(method, code, message string) {
	s.InjectFault(method, Fault{Code: code, Message: message})
}

// ---- accessors -------------------------------------------------------------------------

// PaneState is a snapshot of one simulated pane.
type PaneState struct {
	ID, TerminalID, WorkspaceID, TabID string
	Agent, Name, Status                string
	StateChangeSeq                     uint64
	InteractiveReady, LaunchPending    bool
	BracketedPaste, Seen, Closed       bool
	Composer                           string
	// Label is the pane's manual label, Cwd its cwd.
	Label, Cwd string
	// Command is the argv the pane runs directly (layout.apply), nil for a
	// shell; Env is the env the pane was created with (nil when none).
	Command []string
	Env     map[string]string
	// Interrupts counts the turns a lone Escape stopped.
	Interrupts int
}

// Pane returns a snapshot of a pane (also of a closed one).
func (s *Server) Pane(paneID string) PaneState {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.findPaneLocked(paneID)
	if p == nil {
		panic(fmt.Sprintf("herdrtest: no pane %q", paneID))
	}
	return PaneState{
		ID: p.id, TerminalID: p.terminalID, WorkspaceID: p.ws.id, TabID: p.tab.id,
		Agent: p.agent, Name: p.name, Status: p.status(), StateChangeSeq: p.seq,
		InteractiveReady: p.ready, LaunchPending: p.pending, BracketedPaste: p.bracketed,
		Seen: p.seen, Closed: p.gone, Composer: p.composer,
		Label: p.label, Cwd: p.cwd, Command: append([]string(nil), p.command...), Env: copyEnv(p.env),
		Interrupts: p.interrupts,
	}
}

// PaneIDs lists the live panes in creation order.
func (s *Server) PaneIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.paneOrder))
	for _, p := range s.paneOrder {
		out = append(out, p.id)
	}
	return out
}

// Status is the pane's current agent_status.
func (s *Server) Status(paneID string) string { return s.Pane(paneID).Status }

// StateChangeSeq is the pane's current state_change_seq.
func (s *Server) StateChangeSeq(paneID string) uint64 { return s.Pane(paneID).StateChangeSeq }

// Composer is the text currently in the pane's composer / input line.
func (s *Server) Composer(paneID string) string { return s.Pane(paneID).Composer }

// Submitted lists the prompts the agent accepted as turns, in order.
func (s *Server) Submitted(paneID string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.mustFindLocked(paneID).submitted...)
}

// Writes lists every raw PTY write to the pane, in order.
func (s *Server) Writes(paneID string) [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out [][]byte
	for _, w := range s.mustFindLocked(paneID).writes {
		out = append(out, append([]byte(nil), w...))
	}
	return out
}

// TypedIntoDialog lists text written to the pane while its dialog was open
// (one entry per write). Tests assert it stays empty.
func (s *Server) TypedIntoDialog(paneID string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.mustFindLocked(paneID).dialogText...)
}

// Screen is what pane.read source=recent_unwrapped with lines=1000 returns.
func (s *Server) Screen(paneID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 1000
	text, _ := s.readLocked(s.mustFindLocked(paneID), "recent_unwrapped", &n)
	return text
}

func (s *Server) mustFindLocked(id string) *pane {
	p := s.findPaneLocked(id)
	if p == nil {
		panic(fmt.Sprintf("herdrtest: no pane %q", id))
	}
	return p
}

// Requests lists every request line received (without its newline), in
// arrival order, including invalid ones. Dropped lines are not included.
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

// Sent lists every reply and event line the server wrote (faulted replies
// excluded).
func (s *Server) Sent() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.sent...)
}

// Events lists the event lines currently in the 512-event ring.
func (s *Server) Events() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.events))
	for _, e := range s.events {
		out = append(out, string(e.line))
	}
	return out
}

// Aborted counts long-running requests (waits, agent.prompt with wait,
// subscriptions) abandoned because the client half-closed or sent extra
// bytes.
func (s *Server) Aborted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.aborts)
}

// Aborts lists those abandoned requests with the reason.
func (s *Server) Aborts() []Abort {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Abort(nil), s.aborts...)
}

// Dropped counts connections closed without a reply because the request
// line was over 1 MiB, not valid UTF-8, or not complete within 5 s.
func (s *Server) Dropped() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}

// Violations lists every schema violation seen (requests, replies and
// events), including those AllowInvalidRequests kept from failing the test.
func (s *Server) Violations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.violations...)
}
