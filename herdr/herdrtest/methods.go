package herdrtest

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"
)

// Handlers of the ordinary (one reply, no wait) methods. They run with s.mu
// held. Params already passed the schema, so decoding cannot fail on types.

var agentNameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)
var reportSourceRE = regexp.MustCompile(`^[A-Za-z0-9:._-]{1,80}$`)

func paneNotFound(id, paneID string) []byte {
	return errorLine(id, "pane_not_found", "pane "+paneID+" not found")
}

// resolveAgentLocked resolves an agent target: a live agent name or the id
// of a pane that currently hosts an agent (API.md §4.1).
func (s *Server) resolveAgentLocked(id, target string) (*pane, []byte) {
	for _, p := range s.paneOrder {
		if p.agent != "" && p.name != "" && p.name == target {
			return p, nil
		}
	}
	if p := s.panes[target]; p != nil && p.agent != "" {
		return p, nil
	}
	return nil, errorLine(id, "agent_not_found", "agent "+target+" not found")
}

func (s *Server) handleLocked(req *request) []byte {
	id := req.id
	var p struct {
		PaneID       string            `json:"pane_id"`
		Target       string            `json:"target"`
		WorkspaceID  *string           `json:"workspace_id"`
		TabID        string            `json:"tab_id"`
		CallerPaneID *string           `json:"caller_pane_id"`
		Source       string            `json:"source"`
		Lines        *int              `json:"lines"`
		Format       string            `json:"format"`
		Text         *string           `json:"text"`
		Keys         []string          `json:"keys"`
		Cwd          *string           `json:"cwd"`
		Label        *string           `json:"label"`
		Focus        bool              `json:"focus"`
		Env          map[string]string `json:"env"`
		TargetPaneID *string           `json:"target_pane_id"`
		Direction    string            `json:"direction"`
		Ratio        *float64          `json:"ratio"`
		Name         *string           `json:"name"`
		Kind         string            `json:"kind"`
		Args         []string          `json:"args"`
		TimeoutMs    *uint64           `json:"timeout_ms"`
		Agent        string            `json:"agent"`
		State        string            `json:"state"`
		Seq          *uint64           `json:"seq"`
	}
	_ = json.Unmarshal(req.params, &p)
	str := func(v *string) string {
		if v == nil {
			return ""
		}
		return *v
	}

	switch req.method {
	case "ping":
		return okLine(id, obj{{"type", "pong"}, {"version", s.version}, {"protocol", s.protocol},
			{"capabilities", obj{{"live_handoff", true}, {"detached_server_daemon", true}}}})

	case "session.snapshot":
		snap := obj{{"version", s.version}, {"protocol", s.protocol}}
		if s.focusedWS != nil {
			snap = append(snap, kv{"focused_workspace_id", s.focusedWS.id})
			if t := s.focusedWS.activeTab; t != nil {
				snap = append(snap, kv{"focused_tab_id", t.id})
				if t.active != nil {
					snap = append(snap, kv{"focused_pane_id", t.active.id})
				}
			}
		}
		wss, tabs, panes, layouts, agents := []workspaceInfo{}, []tabInfo{}, []paneInfo{}, []layoutSnapshot{}, []agentInfo{}
		for _, ws := range s.workspaces {
			wss = append(wss, s.workspaceInfoLocked(ws))
			for _, t := range ws.tabs {
				tabs = append(tabs, s.tabInfoLocked(t))
				layouts = append(layouts, s.layoutLocked(t))
			}
		}
		for _, q := range s.paneOrder {
			panes = append(panes, s.paneInfoLocked(q))
			if q.agent != "" {
				agents = append(agents, s.agentInfoLocked(q))
			}
		}
		snap = append(snap, kv{"workspaces", wss}, kv{"tabs", tabs}, kv{"panes", panes}, kv{"layouts", layouts}, kv{"agents", agents})
		return okLine(id, obj{{"type", "session_snapshot"}, {"snapshot", snap}})

	case "workspace.list":
		out := []workspaceInfo{}
		for _, ws := range s.workspaces {
			out = append(out, s.workspaceInfoLocked(ws))
		}
		return okLine(id, obj{{"type", "workspace_list"}, {"workspaces", out}})

	case "workspace.get", "workspace.focus":
		ws := s.workspaceLocked(str(p.WorkspaceID))
		if ws == nil {
			return errorLine(id, "workspace_not_found", "workspace "+str(p.WorkspaceID)+" not found")
		}
		if req.method == "workspace.focus" {
			s.focusedWS = ws
			s.emitLocked("workspace_focused", "", "", obj{{"workspace_id", ws.id}})
			return okLine(id, obj{{"type", "ok"}})
		}
		return okLine(id, obj{{"type", "workspace_info"}, {"workspace", s.workspaceInfoLocked(ws)}})

	case "workspace.create":
		if bad := checkEnv(id, p.Env); bad != nil {
			return bad
		}
		ws := s.newWorkspaceLocked(str(p.Label))
		t := s.newTabLocked(ws, "")
		np := s.newPaneLocked(t, str(p.Cwd))
		s.startShellLocked(np, p.Env)
		if p.Focus {
			s.focusedWS = ws
		}
		s.emitCreatedLocked(ws, t, np)
		return okLine(id, obj{{"type", "workspace_created"}, {"workspace", s.workspaceInfoLocked(ws)},
			{"tab", s.tabInfoLocked(t)}, {"root_pane", s.paneInfoLocked(np)}})

	case "tab.list":
		out := []tabInfo{}
		for _, ws := range s.workspaces {
			if p.WorkspaceID != nil && ws.id != *p.WorkspaceID {
				continue
			}
			for _, t := range ws.tabs {
				out = append(out, s.tabInfoLocked(t))
			}
		}
		return okLine(id, obj{{"type", "tab_list"}, {"tabs", out}})

	case "tab.get":
		t := s.tabLocked(p.TabID)
		if t == nil {
			return errorLine(id, "tab_not_found", "tab "+p.TabID+" not found")
		}
		return okLine(id, obj{{"type", "tab_info"}, {"tab", s.tabInfoLocked(t)}})

	case "tab.create":
		if bad := checkEnv(id, p.Env); bad != nil {
			return bad
		}
		var ws *workspace
		if p.WorkspaceID != nil {
			if ws = s.workspaceLocked(*p.WorkspaceID); ws == nil {
				return errorLine(id, "workspace_not_found", "workspace "+*p.WorkspaceID+" not found")
			}
		} else if ws = s.focusedWS; ws == nil {
			return errorLine(id, "no_active_workspace", "no active workspace")
		}
		t := s.newTabLocked(ws, str(p.Label))
		np := s.newPaneLocked(t, str(p.Cwd))
		s.startShellLocked(np, p.Env)
		if p.Focus {
			s.focusedWS, ws.activeTab = ws, t
		}
		s.emitCreatedLocked(nil, t, np)
		return okLine(id, obj{{"type", "tab_created"}, {"tab", s.tabInfoLocked(t)}, {"root_pane", s.paneInfoLocked(np)}})

	case "pane.split":
		if bad := checkEnv(id, p.Env); bad != nil {
			return bad
		}
		if p.Ratio != nil && (*p.Ratio <= 0 || *p.Ratio >= 1) {
			return errorLine(id, "invalid_params", fmt.Sprintf("ratio must be between 0 and 1, got %v", *p.Ratio))
		}
		var target *pane
		switch {
		case p.TargetPaneID != nil:
			if target = s.panes[*p.TargetPaneID]; target == nil {
				return paneNotFound(id, *p.TargetPaneID)
			}
		case p.WorkspaceID != nil:
			ws := s.workspaceLocked(*p.WorkspaceID)
			if ws == nil {
				return errorLine(id, "workspace_not_found", "workspace "+*p.WorkspaceID+" not found")
			}
			if ws.activeTab == nil || ws.activeTab.active == nil {
				return errorLine(id, "no_active_pane", "no active pane")
			}
			target = ws.activeTab.active
		default:
			if target = s.focusedPaneLocked(); target == nil {
				return errorLine(id, "no_active_pane", "no active pane")
			}
		}
		cwd := str(p.Cwd)
		if cwd == "" {
			cwd = target.cwd
		}
		np := s.newPaneLocked(target.tab, cwd)
		s.startShellLocked(np, p.Env)
		if p.Focus {
			target.tab.active = np
			s.focusedWS, target.ws.activeTab = target.ws, target.tab
		}
		s.emitCreatedLocked(nil, nil, np)
		return okLine(id, obj{{"type", "pane_info"}, {"pane", s.paneInfoLocked(np)}})

	case "pane.list":
		out := []paneInfo{}
		if p.WorkspaceID != nil && s.workspaceLocked(*p.WorkspaceID) == nil {
			return errorLine(id, "workspace_not_found", "workspace "+*p.WorkspaceID+" not found")
		}
		for _, q := range s.paneOrder {
			if p.WorkspaceID == nil || q.ws.id == *p.WorkspaceID {
				out = append(out, s.paneInfoLocked(q))
			}
		}
		return okLine(id, obj{{"type", "pane_list"}, {"panes", out}})

	case "pane.get":
		q := s.panes[p.PaneID]
		if q == nil {
			return paneNotFound(id, p.PaneID)
		}
		return okLine(id, obj{{"type", "pane_info"}, {"pane", s.paneInfoLocked(q)}})

	case "pane.current":
		var q *pane
		if p.CallerPaneID != nil {
			if q = s.panes[*p.CallerPaneID]; q == nil {
				return paneNotFound(id, *p.CallerPaneID)
			}
		} else if q = s.focusedPaneLocked(); q == nil {
			return errorLine(id, "no_active_pane", "no active pane")
		}
		return okLine(id, obj{{"type", "pane_current"}, {"pane", s.paneInfoLocked(q)}})

	case "pane.focus", "agent.focus":
		var q *pane
		if req.method == "agent.focus" {
			var bad []byte
			if q, bad = s.resolveAgentLocked(id, p.Target); bad != nil {
				return bad
			}
		} else if q = s.panes[p.PaneID]; q == nil {
			return paneNotFound(id, p.PaneID)
		}
		s.focusLocked(q)
		if req.method == "agent.focus" {
			return okLine(id, obj{{"type", "agent_info"}, {"agent", s.agentInfoLocked(q)}})
		}
		return okLine(id, obj{{"type", "pane_info"}, {"pane", s.paneInfoLocked(q)}})

	case "pane.rename":
		q := s.panes[p.PaneID]
		if q == nil {
			return paneNotFound(id, p.PaneID)
		}
		q.label = str(p.Label)
		q.revision++
		s.emitLocked("pane_updated", q.id, "", obj{{"pane", s.paneInfoLocked(q)}})
		return okLine(id, obj{{"type", "pane_info"}, {"pane", s.paneInfoLocked(q)}})

	case "pane.read", "agent.read":
		var q *pane
		if req.method == "agent.read" {
			var bad []byte
			if q, bad = s.resolveAgentLocked(id, p.Target); bad != nil {
				return bad
			}
		} else if q = s.panes[p.PaneID]; q == nil {
			return paneNotFound(id, p.PaneID)
		}
		format := p.Format
		if format == "" {
			format = "text"
		}
		if format == "ansi" && p.Source == "detection" {
			format = "text" // detection is always plain
		}
		text, trunc := s.readLocked(q, p.Source, p.Lines)
		read := readResult{PaneID: q.id, WorkspaceID: q.ws.id, TabID: q.tab.id, Source: p.Source, Format: format, Text: text, Truncated: trunc}
		return okLine(id, obj{{"type", "pane_read"}, {"read", read}})

	case "pane.send_text":
		q := s.panes[p.PaneID]
		if q == nil {
			return paneNotFound(id, p.PaneID)
		}
		s.writeLocked(q, []byte(str(p.Text)))
		return okLine(id, obj{{"type", "ok"}})

	case "pane.send_keys":
		q := s.panes[p.PaneID]
		if q == nil {
			return paneNotFound(id, p.PaneID)
		}
		enc, err := encodeKeys(p.Keys)
		if err != nil {
			return errorLine(id, "invalid_key", err.Error())
		}
		for _, b := range enc { // one PTY write per key
			s.writeLocked(q, b)
		}
		return okLine(id, obj{{"type", "ok"}})

	case "pane.send_input":
		q := s.panes[p.PaneID]
		if q == nil {
			return paneNotFound(id, p.PaneID)
		}
		enc, err := encodeKeys(p.Keys)
		if err != nil {
			return errorLine(id, "invalid_key", err.Error())
		}
		var buf []byte
		if t := str(p.Text); t != "" {
			buf = append(buf, s.pasteLocked(q, t)...)
		}
		for _, b := range enc {
			buf = append(buf, b...)
		}
		s.writeLocked(q, buf) // everything in ONE write
		return okLine(id, obj{{"type", "ok"}})

	case "agent.send_keys":
		q, bad := s.resolveAgentLocked(id, p.Target)
		if bad != nil {
			return bad
		}
		enc, err := encodeKeys(p.Keys)
		if err != nil {
			return errorLine(id, "invalid_key", err.Error())
		}
		if q.pending || !q.known {
			return errorLine(id, "agent_not_ready", "agent "+p.Target+" is not an active named agent")
		}
		var buf []byte
		for _, b := range enc {
			buf = append(buf, b...)
		}
		s.writeLocked(q, buf)
		return okLine(id, obj{{"type", "ok"}})

	case "pane.close":
		q := s.panes[p.PaneID]
		if q == nil {
			return paneNotFound(id, p.PaneID)
		}
		s.removePaneLocked(q, "pane_closed")
		return okLine(id, obj{{"type", "ok"}})

	case "pane.process_info":
		var q *pane
		if p.PaneID != "" {
			if q = s.panes[p.PaneID]; q == nil {
				return paneNotFound(id, p.PaneID)
			}
		} else if q = s.focusedPaneLocked(); q == nil {
			return errorLine(id, "no_active_pane", "no active pane")
		}
		return okLine(id, obj{{"type", "pane_process_info"}, {"process_info", s.processInfoLocked(q)}})

	case "agent.list":
		out := []agentInfo{}
		for _, q := range s.paneOrder {
			if q.agent != "" {
				out = append(out, s.agentInfoLocked(q))
			}
		}
		return okLine(id, obj{{"type", "agent_list"}, {"agents", out}})

	case "agent.get":
		q, bad := s.resolveAgentLocked(id, p.Target)
		if bad != nil {
			return bad
		}
		return okLine(id, obj{{"type", "agent_info"}, {"agent", s.agentInfoLocked(q)}})

	case "agent.rename":
		q, bad := s.resolveAgentLocked(id, p.Target)
		if bad != nil {
			return bad
		}
		name := str(p.Name)
		if name != "" {
			if !agentNameRE.MatchString(name) {
				return errorLine(id, "invalid_agent_name", "invalid agent name "+name)
			}
			if o := s.agentByNameLocked(name); o != nil && o != q {
				return errorLine(id, "agent_name_taken", "agent name "+name+" is already taken")
			}
		}
		q.name = name
		q.revision++
		return okLine(id, obj{{"type", "agent_info"}, {"agent", s.agentInfoLocked(q)}})

	case "agent.start":
		return s.agentStartLocked(id, str(p.Name), p.Kind, p.PaneID, p.Args, p.TimeoutMs)

	case "layout.apply":
		return s.layoutApplyLocked(id, req.params)

	case "pane.report_agent":
		q := s.panes[p.PaneID]
		if q == nil {
			return paneNotFound(id, p.PaneID)
		}
		if !reportSourceRE.MatchString(p.Source) {
			return errorLine(id, "invalid_params", "source must be 1-80 characters of [A-Za-z0-9:._-]")
		}
		if p.Seq != nil {
			if q.source == p.Source && *p.Seq <= q.reportSeq {
				return okLine(id, obj{{"type", "ok"}}) // stale report, ignored
			}
			q.reportSeq = *p.Seq
		}
		if q.agent != p.Agent {
			q.agent = p.Agent
			_, q.known = agentExecutables[p.Agent]
			q.occupant++
			s.emitLocked("pane_agent_detected", q.id, "", obj{{"pane_id", q.id}, {"workspace_id", q.ws.id}, {"agent", p.Agent}})
		}
		q.source = p.Source
		q.pending = false
		s.setStateLocked(q, p.State, q.seen)
		return okLine(id, obj{{"type", "ok"}})

	case "pane.release_agent":
		q := s.panes[p.PaneID]
		if q == nil {
			return paneNotFound(id, p.PaneID)
		}
		if q.source == p.Source {
			q.source = ""
			if !q.known {
				s.exitAgentLocked(q)
			}
		}
		return okLine(id, obj{{"type", "ok"}})
	}
	if s.tb != nil {
		s.tb.Logf("herdrtest: method %s is not simulated by the fake", req.method)
	}
	return errorLine(id, "internal_error", "herdrtest: method "+req.method+" is not simulated by the fake")
}

func checkEnv(id string, env map[string]string) []byte {
	for k := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return errorLine(id, "invalid_env", fmt.Sprintf("invalid env key %q", k))
		}
	}
	return nil
}

func (s *Server) workspaceLocked(id string) *workspace {
	for _, ws := range s.workspaces {
		if ws.id == id {
			return ws
		}
	}
	return nil
}

func (s *Server) tabLocked(id string) *tab {
	for _, ws := range s.workspaces {
		for _, t := range ws.tabs {
			if t.id == id {
				return t
			}
		}
	}
	return nil
}

func (s *Server) agentByNameLocked(name string) *pane {
	for _, q := range s.paneOrder {
		if q.agent != "" && q.name == name {
			return q
		}
	}
	return nil
}

// focusLocked focuses a pane in the UI, which marks it seen (done → idle).
func (s *Server) focusLocked(q *pane) {
	s.focusedWS, q.ws.activeTab, q.tab.active = q.ws, q.tab, q
	s.emitLocked("pane_focused", q.id, "", obj{{"pane_id", q.id}, {"workspace_id", q.ws.id}})
	s.setStateLocked(q, q.state, true)
}

// pasteLocked wraps text in bracketed-paste markers when the pane's app
// enabled mode 2004. herdr does not sanitise the text.
func (s *Server) pasteLocked(q *pane, text string) []byte {
	if q.bracketed {
		return []byte("\x1b[200~" + text + "\x1b[201~")
	}
	return []byte(text)
}

func (s *Server) processInfoLocked(q *pane) obj {
	n := 0
	fmt.Sscanf(q.terminalID, "term_%x", &n)
	shellPID := 4000 + n%50000
	procs := []obj{{{"pid", shellPID}, {"name", "bash"}, {"argv0", "bash"}}}
	if q.command != nil { // no shell: the pane's process is the command itself
		argv := append([]string(nil), q.command...)
		name := path.Base(argv[0])
		procs = []obj{{{"pid", shellPID}, {"name", name}, {"argv0", argv[0]}, {"argv", argv}}}
	} else if q.agent != "" || q.busy || q.rcBusy {
		name := "sleep"
		if q.agent != "" {
			name = q.agent
			if exe, ok := agentExecutables[q.agent]; ok {
				name = exe
			}
		}
		procs = []obj{{{"pid", shellPID + 1}, {"name", name}, {"argv0", name}}}
	}
	o := obj{{"pane_id", q.id}, {"shell_pid", shellPID}, {"foreground_process_group_id", procs[0][0].v},
		{"tty", fmt.Sprintf("/dev/pts/%d", n%64)}, {"foreground_processes", procs}}
	if q.cwd != "" {
		procs[0] = append(procs[0], kv{"cwd", q.cwd})
	}
	return o
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

func shellQuote(a string) string {
	if shellSafe.MatchString(a) {
		return a
	}
	return "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
}

func (s *Server) agentStartLocked(id, name, kind, paneID string, args []string, timeoutMs *uint64) []byte {
	if !agentNameRE.MatchString(name) {
		return errorLine(id, "invalid_agent_name", "invalid agent name "+name+": must match [a-z][a-z0-9_-]{0,31}")
	}
	if s.agentByNameLocked(name) != nil {
		return errorLine(id, "agent_name_taken", "agent name "+name+" is already taken")
	}
	exe, ok := agentExecutables[kind]
	if !ok {
		return errorLine(id, "unsupported_agent_kind", "unsupported agent kind "+kind)
	}
	for _, a := range args {
		if strings.IndexFunc(a, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
			return errorLine(id, "invalid_agent_argument", fmt.Sprintf("agent argument %q contains control characters", a))
		}
	}
	if timeoutMs != nil && (*timeoutMs <= 3000 || *timeoutMs > 300000) {
		return errorLine(id, "invalid_agent_timeout", "timeout_ms must be greater than 3000 and at most 300000")
	}
	q := s.panes[paneID]
	if q == nil {
		return errorLine(id, "agent_pane_not_found", "agent target pane "+paneID+" not found")
	}
	if q.agent != "" || q.busy || q.rcBusy || q.command != nil {
		return errorLine(id, "agent_pane_busy", "agent target pane "+paneID+" is not an available shell")
	}
	argv := append([]string{exe}, args...)
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = shellQuote(a)
	}
	// herdr types the command line plus Enter into the shell.
	q.startKind, q.startName = kind, name
	s.writeLocked(q, []byte(strings.Join(quoted, " ")+"\r"))
	if q.agent == "" { // the shell did not launch it (e.g. a draft was in the way)
		q.startKind, q.startName = "", ""
		return errorLine(id, "agent_start_input_failed", "agent command was not accepted by the shell in pane "+paneID)
	}
	return okLine(id, obj{{"type", "agent_started"}, {"agent", s.agentInfoLocked(q)}, {"argv", argv}})
}

// ---- agent.prompt ------------------------------------------------------------------

type promptParams struct {
	Target string `json:"target"`
	Text   string `json:"text"`
	Wait   *struct {
		Until     []string `json:"until"`
		TimeoutMs *uint64  `json:"timeout_ms"`
	} `json:"wait"`
}

// promptLocked is the app side of agent.prompt (handle_agent_prompt): checks,
// text write, Enter scheduled SubmitDelay later, immediate agent_prompted.
func (s *Server) promptLocked(id string, pp promptParams) (*pane, []byte, bool) {
	if pp.Text == "" {
		return nil, errorLine(id, "empty_agent_prompt", "agent prompt text must not be empty"), false
	}
	q, bad := s.resolveAgentLocked(id, pp.Target)
	if bad != nil {
		return nil, bad, false
	}
	if s.protocol >= 20 && q.status() == "blocked" {
		return nil, errorLine(id, "agent_blocked", "agent "+pp.Target+" is blocked and requires interactive input"), false
	}
	if !q.known || q.pending {
		return nil, errorLine(id, "agent_not_ready", "agent "+pp.Target+" is not an active named agent"), false
	}
	if q.agent == "copilot" {
		s.writeLocked(q, []byte("\x1b[I")) // focus gained
	}
	s.writeLocked(q, s.pasteLocked(q, pp.Text))
	occ := q.occupant
	s.afterLocked(s.submitDelay, func() {
		if !q.gone && q.occupant == occ {
			s.writeLocked(q, []byte("\r"))
		}
	})
	return q, okLine(id, obj{{"type", "agent_prompted"}, {"agent", s.agentInfoLocked(q)}}), true
}

func (s *Server) agentPrompt(c *connCtx) []byte {
	var pp promptParams
	_ = json.Unmarshal(c.req.params, &pp)
	id := c.req.id
	s.mu.Lock()
	if pp.Wait == nil {
		_, reply, _ := s.promptLocked(id, pp)
		s.mu.Unlock()
		return reply
	}
	// prompt_agent: agent.get first, then the prompt, then the waits.
	if _, bad := s.resolveAgentLocked(id, pp.Target); bad != nil {
		s.mu.Unlock()
		return bad
	}
	q, reply, ok := s.promptLocked(id, pp)
	if !ok {
		s.mu.Unlock()
		return reply
	}
	baseline, status, occ := q.seq, q.status(), q.occupant
	stall := s.stallTimeout
	s.mu.Unlock()

	started := time.Now()
	until := untilOrDefault(pp.Wait.Until)
	timeoutMs := pp.Wait.TimeoutMs
	prompted := func() []byte {
		return okLine(id, obj{{"type", "agent_prompted"}, {"agent", s.agentInfoLocked(q)}})
	}

	if status != "working" {
		// Activity gate: some lifecycle change must be seen within 5 s.
		gate := stall
		plainTimeout := false
		if timeoutMs != nil && time.Duration(*timeoutMs)*time.Millisecond <= stall {
			gate = time.Duration(*timeoutMs) * time.Millisecond
			plainTimeout = true
		}
		moved := false
		r := s.waitFor(c, started.Add(gate), func(expired bool) []byte {
			if q.gone || q.occupant != occ {
				return notRunning(id)
			}
			if q.seq > baseline {
				moved = true
				return []byte{}
			}
			if !expired {
				return nil
			}
			if plainTimeout {
				return errorLine(id, "timeout", "timed out waiting for agent status")
			}
			return errorLine(id, "agent_prompt_stalled", fmt.Sprintf(
				"agent prompt produced no observed state change within %d ms; status is %s and state_change_seq remained %d",
				gate.Milliseconds(), q.status(), baseline))
		})
		if !moved {
			return r // nil (client gone) or an error
		}
	}
	return s.waitFor(c, deadlineFrom(timeoutMs, started), func(expired bool) []byte {
		if q.gone || q.occupant != occ {
			return notRunning(id)
		}
		for _, u := range until {
			if q.status() == u {
				return prompted()
			}
		}
		if expired {
			return errorLine(id, "timeout", "timed out waiting for agent status")
		}
		return nil
	})
}
