package herdrtest

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"
)

// The simulated world: workspaces, tabs and panes, each pane a tiny terminal
// that runs either a shell or an agent TUI. Everything here is called with
// Server.mu held.

// Agent kinds herdr recognises (API.md §4.6) and the executable agent.start
// launches for each.
var agentExecutables = map[string]string{
	"pi": "pi", "claude": "claude", "codex": "codex", "gemini": "gemini",
	"cursor": "cursor-agent", "devin": "devin", "agy": "agy", "cline": "cline",
	"omp": "omp", "mastracode": "mastracode", "opencode": "opencode",
	"copilot": "copilot", "kimi": "kimi", "kiro": "kiro-cli", "droid": "droid",
	"amp": "amp", "grok": "grok", "hermes": "hermes", "kilo": "kilo",
	"qodercli": "qodercli", "qwen": "qwen", "maki": "maki",
}

var executableKinds = func() map[string]string {
	m := map[string]string{}
	for k, exe := range agentExecutables {
		m[exe] = k
	}
	return m
}()

const (
	screenRows = 40  // headless default terminal size is 120×40 (0.8.2)
	screenCols = 120 //
	ringSize   = 512 // retained events
)

const publicAlphabet = "123456789ABCDEFGHJKMNPQRSTVWXYZ0"

// encodePublicNumber spells n in herdr's 32-symbol alphabet (bijective, so
// 1 → "1", 10 → "A", 32 → "0", 33 → "11"). Clients must treat ids as opaque.
func encodePublicNumber(n int) string {
	var b []byte
	for n > 0 {
		n--
		b = append([]byte{publicAlphabet[n%32]}, b...)
		n /= 32
	}
	return string(b)
}

type workspace struct {
	id        string
	number    int
	label     string
	tabs      []*tab
	activeTab *tab
	nextTab   int
	nextPane  int
}

type tab struct {
	id     string
	ws     *workspace
	number int
	label  string
	custom bool // label given by a caller (kept when layout.apply replaces the tab)
	panes  []*pane
	active *pane
}

type pane struct {
	id         string
	terminalID string
	ws         *workspace
	tab        *tab
	cwd        string
	label      string
	revision   uint64
	gone       bool // closed or exited

	// terminal
	lines     []string // committed scrollback
	composer  string   // the input line / agent composer
	bracketed bool     // app enabled bracketed paste (mode 2004)
	shellBPM  bool     // the shell's own mode, restored when an agent exits
	pasting   bool
	writes    [][]byte
	swallow   int
	busy      bool // foreground group is not the shell alone
	rcBusy    bool // the shell's rc files still run (see SetShellStartup)
	shell     func(cmd string) []string
	command   []string          // argv run directly (layout.apply); nil = a shell
	env       map[string]string // env given at creation

	// agent
	agent        string // detected/reported label; "" = plain shell
	known        bool   // a kind herdr recognises (agent.prompt works)
	name         string
	state        string // idle|working|blocked|unknown (before the seen mapping)
	seen         bool
	seq          uint64 // state_change_seq
	ready        bool   // interactive_ready
	pending      bool   // launch_pending
	managed      bool   // launched by agent.start
	occupant     int    // bumped when the agent occupant changes
	preBlock     string
	queue        []string // prompts whose turns are running or queued
	turnGen      int
	reply        func(prompt string) string
	source       string // pane.report_agent authority
	reportSeq    uint64
	startName    string // agent.start intent, consumed by the shell
	startKind    string
	submitted    []string
	dialogText   []string
	interrupts   int  // turns a lone Escape stopped
	deafToEscape bool // IgnoreEscape
}

// status is the public agent_status (API.md §3: Idle+unseen → done).
func (p *pane) status() string {
	if p.agent == "" {
		return "unknown"
	}
	if p.state == "idle" && !p.seen {
		return "done"
	}
	return p.state
}

func (s *Server) newWorkspaceLocked(label string) *workspace {
	s.nextWS++
	n := s.nextWS
	ws := &workspace{id: "w" + encodePublicNumber(n), number: n, label: label}
	if ws.label == "" {
		ws.label = fmt.Sprintf("workspace %d", n)
	}
	s.workspaces = append(s.workspaces, ws)
	if s.focusedWS == nil {
		s.focusedWS = ws
	}
	return ws
}

func (s *Server) newTabLocked(ws *workspace, label string) *tab {
	ws.nextTab++
	t := &tab{id: ws.id + ":t" + encodePublicNumber(ws.nextTab), ws: ws, number: ws.nextTab, label: label, custom: label != ""}
	if t.label == "" {
		t.label = fmt.Sprintf("tab %d", t.number)
	}
	ws.tabs = append(ws.tabs, t)
	if ws.activeTab == nil {
		ws.activeTab = t
	}
	return t
}

func (s *Server) newPaneLocked(t *tab, cwd string) *pane {
	ws := t.ws
	ws.nextPane++
	s.nextTerm++
	p := &pane{
		id:         ws.id + ":p" + encodePublicNumber(ws.nextPane),
		terminalID: fmt.Sprintf("term_%06x", 0x6a1f00+s.nextTerm*0x9d),
		ws:         ws,
		tab:        t,
		cwd:        cwd,
		state:      "unknown",
	}
	t.panes = append(t.panes, p)
	if t.active == nil {
		t.active = p
	}
	s.panes[p.id] = p
	s.everPanes[p.id] = p
	s.paneOrder = append(s.paneOrder, p)
	return p
}

func (s *Server) focusedPaneLocked() *pane {
	if s.focusedWS == nil || s.focusedWS.activeTab == nil {
		return nil
	}
	return s.focusedWS.activeTab.active
}

func (s *Server) isFocusedLocked(p *pane) bool { return s.focusedPaneLocked() == p }

// removePaneLocked takes a pane out of the world. kind is "pane_closed" or
// "pane_exited". Empty tabs and workspaces close with it.
func (s *Server) removePaneLocked(p *pane, kind string) {
	if p.gone {
		return
	}
	p.gone = true
	p.turnGen++
	delete(s.panes, p.id)
	for i, q := range s.paneOrder {
		if q == p {
			s.paneOrder = append(s.paneOrder[:i], s.paneOrder[i+1:]...)
			break
		}
	}
	t, ws := p.tab, p.ws
	for i, q := range t.panes {
		if q == p {
			t.panes = append(t.panes[:i], t.panes[i+1:]...)
			break
		}
	}
	if t.active == p {
		t.active = nil
		if len(t.panes) > 0 {
			t.active = t.panes[0]
		}
	}
	s.emitLocked(kind, p.id, "", obj{{"pane_id", p.id}, {"workspace_id", ws.id}})
	if len(t.panes) > 0 {
		s.emitLayoutLocked(t)
		s.notifyLocked()
		return
	}
	s.dropTabLocked(ws, t)
	if len(ws.tabs) == 0 {
		for i, q := range s.workspaces {
			if q == ws {
				s.workspaces = append(s.workspaces[:i], s.workspaces[i+1:]...)
				break
			}
		}
		if s.focusedWS == ws {
			s.focusedWS = nil
			if len(s.workspaces) > 0 {
				s.focusedWS = s.workspaces[0]
			}
		}
		s.emitLocked("workspace_closed", "", "", obj{{"workspace_id", ws.id}})
	}
	s.notifyLocked()
}

// setStateLocked changes the internal agent state (and seen flag); when the
// public status changes, state_change_seq goes up and events are emitted.
func (s *Server) setStateLocked(p *pane, state string, seen bool) {
	old := p.status()
	p.state, p.seen = state, seen
	if p.status() == old {
		return
	}
	p.seq++
	p.revision++
	s.emitStatusLocked(p)
}

func (s *Server) emitStatusLocked(p *pane) {
	s.emitLocked("pane_agent_status_changed", p.id, p.status(), statusData(p.id, p.ws.id, p.status(), p.agent))
	s.emitLocked("pane_updated", p.id, "", obj{{"pane", s.paneInfoLocked(p)}})
	s.notifyLocked()
}

// ---- terminal input --------------------------------------------------------

var (
	pasteStart = []byte("\x1b[200~")
	pasteEnd   = []byte("\x1b[201~")
)

// writeLocked is one PTY write: it is recorded verbatim, then fed to the
// application running in the pane.
func (s *Server) writeLocked(p *pane, b []byte) {
	if p.gone || len(b) == 0 {
		return
	}
	p.writes = append(p.writes, append([]byte(nil), b...))
	p.revision++
	var dialog strings.Builder
	insert := func(t string) {
		switch {
		case p.agent != "" && p.state == "blocked":
			dialog.WriteString(t)
		case p.pending:
			// the agent's TUI is not up yet: keystrokes are lost
		default:
			p.composer += t
		}
	}
	for i := 0; i < len(b); {
		if p.pasting {
			end := bytes.Index(b[i:], pasteEnd)
			if end < 0 {
				insert(string(b[i:]))
				break
			}
			insert(string(b[i : i+end]))
			i += end + len(pasteEnd)
			p.pasting = false
			continue
		}
		c := b[i]
		switch {
		case bytes.HasPrefix(b[i:], pasteStart):
			p.pasting = true
			i += len(pasteStart)
		case c == 0x1b:
			switch {
			case i+1 < len(b) && b[i+1] == '[':
				j := i + 2
				for j < len(b) && (b[j] < 0x40 || b[j] > 0x7e) {
					j++
				}
				i = j + 1
			case i+2 < len(b) && b[i+1] == 'O':
				i += 3
			case i+1 < len(b):
				i += 2 // alt+key
			default:
				i++ // a lone Escape: agents keep the composer, and a turn stops
				s.escapeLocked(p)
			}
		case c == '\r':
			s.enterLocked(p)
			i++
		case c == '\n':
			if p.agent != "" {
				insert("\n") // LF is "newline" in a TUI composer, not submit
			} else {
				s.enterLocked(p)
			}
			i++
		case c == 0x7f || c == 0x08:
			if p.agent == "" || p.state != "blocked" {
				_, n := utf8.DecodeLastRuneInString(p.composer)
				p.composer = p.composer[:len(p.composer)-n]
			}
			i++
		case c == 0x15 || c == 0x03: // ctrl+u, ctrl+c: clear the input line
			if p.agent == "" && c == 0x03 {
				p.lines = append(p.lines, "$ "+p.composer+"^C")
			}
			if p.agent == "" || p.state != "blocked" {
				p.composer = ""
			}
			i++
		case c == '\t':
			insert("\t")
			i++
		case c < 0x20:
			i++
		default:
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 {
				i++
				continue
			}
			// take the whole printable run at once
			j := i
			for j < len(b) && b[j] >= 0x20 && b[j] != 0x7f && b[j] != 0x1b {
				j++
			}
			insert(string(b[i:j]))
			i = j
		}
	}
	if dialog.Len() > 0 {
		p.dialogText = append(p.dialogText, dialog.String())
	}
	s.notifyLocked()
}

// escapeLocked is an agent's reaction to a lone Escape, as Claude Code and
// Codex behave: a running turn stops ("Interrupted by user"), and so does
// one waiting on a permission dialog (the dialog is declined); prompts
// queued behind it are dropped, and the agent is idle (done while
// unseen). An idle agent or a shell ignores it.
func (s *Server) escapeLocked(p *pane) {
	if p.agent == "" || p.pending || p.deafToEscape || (p.state != "working" && p.state != "blocked") {
		return
	}
	p.queue = nil
	p.turnGen++ // a scheduled turn end is void
	p.lines = append(p.lines, "  ⎿  Interrupted by user")
	p.revision++
	s.setStateLocked(p, "idle", p.seen)
	p.interrupts++
}

// enterLocked is the app's reaction to an Enter key.
func (s *Server) enterLocked(p *pane) {
	if p.agent != "" && (p.pending || p.state == "blocked") {
		return // no composer to submit: the TUI is starting or a dialog is open
	}
	if p.swallow > 0 {
		p.swallow--
		return
	}
	if p.agent != "" {
		if p.composer == "" {
			return
		}
		prompt := p.composer
		p.composer = ""
		p.submitted = append(p.submitted, prompt)
		for i, l := range strings.Split(prompt, "\n") {
			if i == 0 {
				p.lines = append(p.lines, "> "+l)
			} else {
				p.lines = append(p.lines, "  "+l)
			}
		}
		p.queue = append(p.queue, prompt)
		if p.state != "working" {
			s.setStateLocked(p, "working", p.seen)
			s.scheduleTurnEndLocked(p)
		}
		return
	}
	cmd := p.composer
	p.composer = ""
	if p.command != nil { // a program run directly, not a shell: the tty echoes the line
		p.lines = append(p.lines, cmd)
		return
	}
	p.lines = append(p.lines, "$ "+cmd)
	fields := strings.Fields(cmd)
	if len(fields) == 0 {
		return
	}
	if kind, ok := executableKinds[fields[0]]; ok {
		name, managed := "", false
		if p.startKind == kind {
			name, managed = p.startName, true
		}
		p.startKind, p.startName = "", ""
		s.launchAgentLocked(p, kind, name, managed)
		return
	}
	switch {
	case p.shell != nil:
		p.lines = append(p.lines, p.shell(cmd)...)
	case fields[0] == "echo":
		p.lines = append(p.lines, strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(cmd), "echo")))
	case fields[0] == "exit":
		s.removePaneLocked(p, "pane_exited")
	}
}

func (s *Server) launchAgentLocked(p *pane, kind, name string, managed bool) {
	p.agent, p.known, p.name, p.managed = kind, true, name, managed
	p.pending, p.ready = true, false
	p.occupant++
	p.shellBPM = p.bracketed
	p.bracketed = true // agent TUIs enable bracketed paste
	p.state = "unknown"
	p.revision++
	s.emitLocked("pane_agent_detected", p.id, "", obj{{"pane_id", p.id}, {"workspace_id", p.ws.id}, {"agent", kind}})
	s.emitLocked("pane_updated", p.id, "", obj{{"pane", s.paneInfoLocked(p)}})
	occ := p.occupant
	s.afterLocked(s.startDelay, func() {
		if p.gone || p.occupant != occ || !p.pending {
			return
		}
		p.pending = false
		p.ready = p.managed
		s.upLocked(p)
	})
	s.notifyLocked()
}

// upLocked ends a launch: the agent is idle, or blocked on a trust dialog
// (SetTrustDialog) that leaves it idle once answered.
func (s *Server) upLocked(p *pane) {
	if s.trustDialog {
		p.preBlock = "idle"
		s.setStateLocked(p, "blocked", p.seen)
		return
	}
	s.setStateLocked(p, "idle", p.seen)
}

// exitAgentLocked returns the pane to its shell (the agent process ended).
func (s *Server) exitAgentLocked(p *pane) {
	if p.agent == "" {
		return
	}
	final := p.status()
	p.agent, p.known, p.name, p.managed, p.source = "", false, "", false, ""
	p.pending, p.ready = false, false
	p.occupant++
	p.turnGen++
	p.queue = nil
	p.bracketed = p.shellBPM
	p.composer = ""
	p.state = "unknown"
	p.seq++
	p.revision++
	s.emitLocked("pane_agent_detected", p.id, "", obj{{"pane_id", p.id}, {"workspace_id", p.ws.id}, {"released", true}, {"final_status", final}})
	s.emitStatusLocked(p)
}

func (s *Server) scheduleTurnEndLocked(p *pane) {
	p.turnGen++
	if s.turnDuration <= 0 {
		return
	}
	gen := p.turnGen
	s.afterLocked(s.turnDuration, func() {
		if p.gone || p.turnGen != gen || p.state != "working" {
			return
		}
		s.finishTurnLocked(p)
	})
}

// finishTurnLocked ends the running turn: the reply is printed, then the
// next queued prompt runs or the agent goes idle (done when unseen).
func (s *Server) finishTurnLocked(p *pane) {
	if len(p.queue) > 0 {
		prompt := p.queue[0]
		p.queue = p.queue[1:]
		reply := "● Done."
		if p.reply != nil {
			reply = p.reply(prompt)
		}
		if reply != "" {
			p.lines = append(p.lines, strings.Split(reply, "\n")...)
		}
		p.revision++
	}
	if len(p.queue) > 0 {
		s.scheduleTurnEndLocked(p)
		s.notifyLocked()
		return
	}
	p.turnGen++
	s.setStateLocked(p, "idle", p.seen)
	s.notifyLocked()
}

// ---- screen ----------------------------------------------------------------

// screenLocked returns the rows the pane shows: scrollback, then the live
// area (composer, working indicator or dialog), unwrapped.
func (s *Server) screenLocked(p *pane) []string {
	rows := append([]string(nil), p.lines...)
	switch {
	case p.agent != "" && p.pending:
		rows = append(rows, "Starting "+p.agent+"…")
	case p.agent != "" && p.state == "blocked":
		rows = append(rows,
			"╭──────────────────────────────────────────╮",
			"│ Permission required                      │",
			"│ Do you want to proceed?                  │",
			"│ ❯ 1. Yes                                 │",
			"│   2. No                                  │",
			"╰──────────────────────────────────────────╯")
	case p.agent != "":
		if p.state == "working" {
			rows = append(rows, "✻ Working… (esc to interrupt)")
		}
		for i, l := range strings.Split(p.composer, "\n") {
			if i == 0 {
				rows = append(rows, "> "+l)
			} else {
				rows = append(rows, "  "+l)
			}
		}
	case p.command != nil:
		rows = append(rows, strings.Split(p.composer, "\n")...)
	default:
		rows = append(rows, strings.Split("$ "+p.composer, "\n")...)
	}
	return rows
}

// wrapRows wraps rows at cols. A composer row ("> …", or a draft's
// later line "  …") goes on indented by two, as an agent's input box
// soft-wraps its text; any other row goes on at the left margin.
func wrapRows(rows []string, cols int) []string {
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		rs := []rune(r)
		if len(rs) <= cols {
			out = append(out, r)
			continue
		}
		indent := ""
		if strings.HasPrefix(r, "> ") || strings.HasPrefix(r, "  ") {
			indent = "  "
		}
		out = append(out, string(rs[:cols]))
		rs = rs[cols:]
		for len(rs) > cols-len(indent) {
			out = append(out, indent+string(rs[:cols-len(indent)]))
			rs = rs[cols-len(indent):]
		}
		out = append(out, indent+string(rs))
	}
	return out
}

// readLocked implements pane.read's text selection (API.md §4.3).
func (s *Server) readLocked(p *pane, source string, lines *int) (text string, truncated bool) {
	rows := s.screenLocked(p)
	if source != "recent_unwrapped" {
		rows = wrapRows(rows, screenCols)
	}
	n := 0
	switch source {
	case "visible", "detection":
		if len(rows) > screenRows {
			rows = rows[len(rows)-screenRows:]
		}
		n = len(rows)
		if lines != nil {
			n = *lines
		}
	default: // recent, recent_unwrapped
		n = 80
		if lines != nil {
			n = *lines
		}
	}
	if n > 1000 {
		n = 1000
	}
	if len(rows) > n {
		rows = rows[len(rows)-n:]
		truncated = true
	}
	return strings.Join(rows, "\n"), truncated
}

// dropTabLocked takes tab t out of ws, moves the active tab if it was t,
// and emits tab_closed.
func (s *Server) dropTabLocked(ws *workspace, t *tab) {
	for i, q := range ws.tabs {
		if q == t {
			ws.tabs = append(ws.tabs[:i], ws.tabs[i+1:]...)
			break
		}
	}
	if ws.activeTab == t {
		ws.activeTab = nil
		if len(ws.tabs) > 0 {
			ws.activeTab = ws.tabs[0]
		}
	}
	s.emitLocked("tab_closed", "", "", obj{{"tab_id", t.id}, {"workspace_id", ws.id}})
}
