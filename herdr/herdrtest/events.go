package herdrtest

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"time"
)

// ---- records as herdr serialises them (optional fields omitted) -------------------

type paneInfo struct {
	PaneID      string `json:"pane_id"`
	TerminalID  string `json:"terminal_id"`
	WorkspaceID string `json:"workspace_id"`
	TabID       string `json:"tab_id"`
	Focused     bool   `json:"focused"`
	Cwd         string `json:"cwd,omitempty"`
	Label       string `json:"label,omitempty"`
	Agent       string `json:"agent,omitempty"`
	AgentStatus string `json:"agent_status"`
	Revision    uint64 `json:"revision"`
}

type agentInfo struct {
	TerminalID             string `json:"terminal_id"`
	Name                   string `json:"name,omitempty"`
	Agent                  string `json:"agent,omitempty"`
	AgentStatus            string `json:"agent_status"`
	ScreenDetectionSkipped bool   `json:"screen_detection_skipped,omitempty"`
	WorkspaceID            string `json:"workspace_id"`
	TabID                  string `json:"tab_id"`
	PaneID                 string `json:"pane_id"`
	Focused                bool   `json:"focused"`
	LaunchPending          bool   `json:"launch_pending,omitempty"`
	InteractiveReady       bool   `json:"interactive_ready,omitempty"`
	StateChangeSeq         uint64 `json:"state_change_seq"`
	Cwd                    string `json:"cwd,omitempty"`
	Revision               uint64 `json:"revision"`
}

type workspaceInfo struct {
	WorkspaceID string `json:"workspace_id"`
	Number      int    `json:"number"`
	Label       string `json:"label"`
	Focused     bool   `json:"focused"`
	PaneCount   int    `json:"pane_count"`
	TabCount    int    `json:"tab_count"`
	ActiveTabID string `json:"active_tab_id"`
	AgentStatus string `json:"agent_status"`
}

type tabInfo struct {
	TabID       string `json:"tab_id"`
	WorkspaceID string `json:"workspace_id"`
	Number      int    `json:"number"`
	Label       string `json:"label"`
	Focused     bool   `json:"focused"`
	PaneCount   int    `json:"pane_count"`
	AgentStatus string `json:"agent_status"`
}

type rect struct {
	X      int `json:"x"`
	Y      int `json:"y"`
	Width  int `json:"width"`
	Height int `json:"height"`
}

type layoutPane struct {
	PaneID  string `json:"pane_id"`
	Focused bool   `json:"focused"`
	Rect    rect   `json:"rect"`
}

type layoutSnapshot struct {
	WorkspaceID   string       `json:"workspace_id"`
	TabID         string       `json:"tab_id"`
	Zoomed        bool         `json:"zoomed"`
	Area          rect         `json:"area"`
	FocusedPaneID string       `json:"focused_pane_id"`
	Panes         []layoutPane `json:"panes"`
	Splits        []any        `json:"splits"`
}

type readResult struct {
	PaneID      string `json:"pane_id"`
	WorkspaceID string `json:"workspace_id"`
	TabID       string `json:"tab_id"`
	Source      string `json:"source"`
	Format      string `json:"format"`
	Text        string `json:"text"`
	Revision    uint64 `json:"revision"`
	Truncated   bool   `json:"truncated"`
}

func (s *Server) paneInfoLocked(p *pane) paneInfo {
	return paneInfo{
		PaneID: p.id, TerminalID: p.terminalID, WorkspaceID: p.ws.id, TabID: p.tab.id,
		Focused: s.isFocusedLocked(p), Cwd: p.cwd, Label: p.label, Agent: p.agent,
		AgentStatus: p.status(), Revision: p.revision,
	}
}

func (s *Server) agentInfoLocked(p *pane) agentInfo {
	return agentInfo{
		TerminalID: p.terminalID, Name: p.name, Agent: p.agent, AgentStatus: p.status(),
		ScreenDetectionSkipped: p.source != "",
		WorkspaceID:            p.ws.id, TabID: p.tab.id, PaneID: p.id, Focused: s.isFocusedLocked(p),
		LaunchPending: p.pending, InteractiveReady: p.ready, StateChangeSeq: p.seq,
		Cwd: p.cwd, Revision: p.revision,
	}
}

// rollup is the roll-up status of a tab or workspace.
func rollup(panes []*pane) string {
	rank := map[string]int{"unknown": 0, "idle": 1, "done": 2, "working": 3, "blocked": 4}
	best := "unknown"
	for _, p := range panes {
		if st := p.status(); rank[st] > rank[best] {
			best = st
		}
	}
	return best
}

func (ws *workspace) allPanes() []*pane {
	var out []*pane
	for _, t := range ws.tabs {
		out = append(out, t.panes...)
	}
	return out
}

func (s *Server) workspaceInfoLocked(ws *workspace) workspaceInfo {
	active := ""
	if ws.activeTab != nil {
		active = ws.activeTab.id
	}
	all := ws.allPanes()
	return workspaceInfo{
		WorkspaceID: ws.id, Number: ws.number, Label: ws.label, Focused: s.focusedWS == ws,
		PaneCount: len(all), TabCount: len(ws.tabs), ActiveTabID: active, AgentStatus: rollup(all),
	}
}

func (s *Server) tabInfoLocked(t *tab) tabInfo {
	return tabInfo{
		TabID: t.id, WorkspaceID: t.ws.id, Number: t.number, Label: t.label,
		Focused: s.focusedWS == t.ws && t.ws.activeTab == t, PaneCount: len(t.panes),
		AgentStatus: rollup(t.panes),
	}
}

func (s *Server) layoutLocked(t *tab) layoutSnapshot {
	l := layoutSnapshot{WorkspaceID: t.ws.id, TabID: t.id, Area: rect{0, 0, screenCols, screenRows}, Panes: []layoutPane{}, Splits: []any{}}
	if t.active != nil {
		l.FocusedPaneID = t.active.id
	}
	n := len(t.panes)
	for i, p := range t.panes {
		w := screenCols / max(n, 1)
		l.Panes = append(l.Panes, layoutPane{PaneID: p.id, Focused: t.active == p, Rect: rect{i * w, 0, w, screenRows}})
	}
	return l
}

// ---- the event ring ------------------------------------------------------------

type event struct {
	seq    uint64
	kind   string // snake_case EventKind
	paneID string
	status string // for pane_agent_status_changed
	data   obj    // {"type":kind, ...}
	line   []byte // {"event":kind,"data":data}
}

// emitLocked appends an event to the ring of the last 512 events.
func (s *Server) emitLocked(kind, paneID, status string, fields obj) {
	data := append(obj{{"type", kind}}, fields...)
	line := mustMarshal(obj{{"event", kind}, {"data", data}})
	if err := s.validate(s.v.ValidateEvent, line); err != nil {
		s.violationLocked(true, "event", err, line)
	}
	if err := noNulls(line); err != nil {
		s.violationLocked(true, "event", err, line)
	}
	s.eventSeq++
	s.events = append(s.events, event{seq: s.eventSeq, kind: kind, paneID: paneID, status: status, data: data, line: line})
	if len(s.events) > ringSize {
		s.events = append([]event(nil), s.events[len(s.events)-ringSize:]...)
	}
	s.notifyLocked()
}

func (s *Server) emitLayoutLocked(t *tab) {
	if len(t.panes) == 0 {
		return
	}
	s.emitLocked("layout_updated", "", "", obj{{"layout", s.layoutLocked(t)}})
}

// emitCreatedLocked announces new objects in herdr's order.
func (s *Server) emitCreatedLocked(ws *workspace, t *tab, p *pane) {
	if ws != nil {
		s.emitLocked("workspace_created", "", "", obj{{"workspace", s.workspaceInfoLocked(ws)}})
	}
	if t != nil {
		s.emitLocked("tab_created", "", "", obj{{"tab", s.tabInfoLocked(t)}})
	}
	s.emitLocked("pane_created", p.id, "", obj{{"pane", s.paneInfoLocked(p)}})
	s.emitLayoutLocked(p.tab)
}

// statusData is the payload of pane.agent_status_changed (no "type").
func statusData(paneID, wsID, status, agent string) obj {
	o := obj{{"pane_id", paneID}, {"workspace_id", wsID}, {"agent_status", status}}
	if agent != "" {
		o = append(o, kv{"agent", agent})
	}
	return o
}

func statusEventLine(data obj) []byte {
	return mustMarshal(obj{{"event", "pane.agent_status_changed"}, {"data", data}})
}

// ---- events.subscribe --------------------------------------------------------------

type outputMatch struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

type subParams struct {
	Type        string       `json:"type"`
	PaneID      string       `json:"pane_id"`
	AgentStatus *string      `json:"agent_status"`
	Source      string       `json:"source"`
	Lines       *int         `json:"lines"`
	Match       *outputMatch `json:"match"`
}

type subscription struct {
	kind     string // event | status | output | scroll
	event    string
	last     uint64
	paneID   string
	filter   string
	initial  []byte
	source   string
	lines    *int
	match    outputMatch
	re       *regexp.Regexp
	matching bool
}

func compileMatch(m outputMatch) (*regexp.Regexp, error) {
	if m.Type != "regex" {
		return nil, nil
	}
	return regexp.Compile(m.Value)
}

func matchOutput(text string, m outputMatch, re *regexp.Regexp) (string, bool) {
	for _, l := range strings.Split(text, "\n") {
		if (re != nil && re.MatchString(l)) || (re == nil && strings.Contains(l, m.Value)) {
			return l, true
		}
	}
	return "", false
}

func (s *Server) subscribe(c *connCtx, f *Fault) {
	var params struct {
		Subscriptions []subParams `json:"subscriptions"`
	}
	_ = json.Unmarshal(c.req.params, &params)
	id := c.req.id
	var subs []*subscription
	var bad []byte
	s.mu.Lock()
	rawNext := len(s.rawEvents) // raw lines sent from now on (even before the ack is read)
	for _, sp := range params.Subscriptions {
		sub := &subscription{paneID: sp.PaneID}
		switch sp.Type {
		case "pane.agent_status_changed", "pane.output_matched", "pane.scroll_changed":
			p := s.panes[sp.PaneID]
			if p == nil {
				bad = errorLine(id, "pane_not_found", "pane "+sp.PaneID+" not found")
				break
			}
			switch sp.Type {
			case "pane.agent_status_changed":
				sub.kind = "status"
				sub.last = s.eventSeq
				if sp.AgentStatus != nil {
					sub.filter = *sp.AgentStatus
					if sub.filter == p.status() {
						sub.initial = statusEventLine(statusData(p.id, p.ws.id, p.status(), p.agent))
					}
				}
			case "pane.output_matched":
				sub.kind = "output"
				sub.source, sub.lines, sub.match = sp.Source, sp.Lines, *sp.Match
				re, err := compileMatch(sub.match)
				if err != nil {
					bad = errorLine(id, "invalid_regex", err.Error())
					break
				}
				sub.re = re
			default:
				sub.kind = "scroll"
			}
		default:
			// Topology subscription: herdr 0.8.2 starts these at sequence 0,
			// so the retained ring (up to 512 old events) is replayed first.
			sub.kind = "event"
			sub.event = strings.Replace(sp.Type, ".", "_", 1)
			sub.last = 0
		}
		if bad != nil {
			break
		}
		subs = append(subs, sub)
	}
	s.mu.Unlock()
	if bad != nil {
		s.deliver(c.conn, c.req, bad, f)
		return
	}
	if !s.deliver(c.conn, c.req, okLine(id, obj{{"type", "subscription_started"}}), f) {
		return
	}
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	for {
		if s.gone(c) {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return
		}
		raw := s.rawEvents[rawNext:]
		rawNext = len(s.rawEvents)
		var lines [][]byte
		for _, sub := range subs {
			if l := s.pollLocked(sub); l != nil {
				lines = append(lines, l)
			}
		}
		s.mu.Unlock()
		for _, l := range raw {
			if !s.writeRaw(c.conn, append(append([]byte(nil), l...), '\n')) {
				return
			}
		}
		for _, l := range lines {
			if err := s.validate(s.v.ValidateEvent, l); err != nil {
				s.violation(true, "event", err, l)
			}
			if err := noNulls(l); err != nil {
				s.violation(true, "event", err, l)
			}
			if !s.writeLine(c.conn, l) {
				return
			}
		}
		select {
		case <-tick.C:
		case <-s.closing:
			return
		}
	}
}

// pollLocked yields at most one event line per subscription per tick, as
// herdr 0.8.2 does.
func (s *Server) pollLocked(sub *subscription) []byte {
	switch sub.kind {
	case "event":
		for _, e := range s.events {
			if e.seq <= sub.last {
				continue
			}
			sub.last = e.seq
			if e.kind == sub.event {
				return e.line
			}
		}
	case "status":
		if sub.initial != nil {
			l := sub.initial
			sub.initial = nil
			return l
		}
		for _, e := range s.events {
			if e.seq <= sub.last {
				continue
			}
			sub.last = e.seq
			if e.kind == "pane_agent_status_changed" && e.paneID == sub.paneID && (sub.filter == "" || sub.filter == e.status) {
				return statusEventLine(e.data[1:]) // drop "type"
			}
		}
	case "output":
		p := s.panes[sub.paneID]
		if p == nil {
			return nil
		}
		source := sub.source
		if source == "recent" {
			source = "recent_unwrapped"
		}
		text, trunc := s.readLocked(p, source, sub.lines)
		line, ok := matchOutput(text, sub.match, sub.re)
		if !ok {
			sub.matching = false
			return nil
		}
		if sub.matching {
			return nil
		}
		sub.matching = true
		read := readResult{PaneID: p.id, WorkspaceID: p.ws.id, TabID: p.tab.id, Source: source, Format: "text", Text: text, Truncated: trunc}
		return mustMarshal(obj{{"event", "pane.output_matched"}, {"data", obj{{"pane_id", p.id}, {"matched_line", line}, {"read", read}}}})
	}
	return nil
}

// ---- waits ------------------------------------------------------------------------------

func deadlineFrom(timeoutMs *uint64, from time.Time) time.Time {
	if timeoutMs == nil {
		return time.Time{}
	}
	return from.Add(time.Duration(*timeoutMs) * time.Millisecond)
}

func (s *Server) eventsWait(c *connCtx) []byte {
	var params struct {
		MatchEvent struct {
			Event       string `json:"event"`
			PaneID      string `json:"pane_id"`
			AgentStatus string `json:"agent_status"`
		} `json:"match_event"`
		TimeoutMs *uint64 `json:"timeout_ms"`
	}
	_ = json.Unmarshal(c.req.params, &params)
	id, m := c.req.id, params.MatchEvent
	if m.Event != "pane_agent_status_changed" {
		return errorLine(id, "unsupported_event_wait_match", "events.wait currently supports pane agent status matches")
	}
	matched := func(data obj) []byte {
		return okLine(id, obj{{"type", "wait_matched"}, {"event", obj{{"event", "pane_agent_status_changed"}, {"data", data}}}})
	}
	s.mu.Lock()
	p := s.panes[m.PaneID]
	if p == nil {
		s.mu.Unlock()
		return errorLine(id, "pane_not_found", "pane "+m.PaneID+" not found")
	}
	last := s.eventSeq
	if p.status() == m.AgentStatus {
		d := append(obj{{"type", "pane_agent_status_changed"}}, statusData(p.id, p.ws.id, p.status(), p.agent)...)
		s.mu.Unlock()
		return matched(d)
	}
	s.mu.Unlock()
	return s.waitFor(c, deadlineFrom(params.TimeoutMs, time.Now()), func(expired bool) []byte {
		for _, e := range s.events {
			if e.seq <= last {
				continue
			}
			last = e.seq
			if e.kind == "pane_agent_status_changed" && e.paneID == m.PaneID && e.status == m.AgentStatus {
				return matched(e.data)
			}
		}
		if s.panes[m.PaneID] == nil {
			return errorLine(id, "pane_not_found", "pane "+m.PaneID+" not found")
		}
		if expired {
			return errorLine(id, "timeout", "timed out waiting for event match")
		}
		return nil
	})
}

var defaultUntil = []string{"idle", "done", "blocked"}

func untilOrDefault(u []string) []string {
	if len(u) == 0 {
		return defaultUntil
	}
	return u
}

func notRunning(id string) []byte {
	return errorLine(id, "agent_not_running", "agent is no longer running in the target pane")
}

func (s *Server) agentWait(c *connCtx) []byte {
	var params struct {
		Target    string   `json:"target"`
		Until     []string `json:"until"`
		TimeoutMs *uint64  `json:"timeout_ms"`
	}
	_ = json.Unmarshal(c.req.params, &params)
	id := c.req.id
	until := untilOrDefault(params.Until)
	s.mu.Lock()
	p, bad := s.resolveAgentLocked(id, params.Target)
	if bad != nil {
		s.mu.Unlock()
		return bad
	}
	reply := func() []byte { return okLine(id, obj{{"type", "agent_info"}, {"agent", s.agentInfoLocked(p)}}) }
	if slices.Contains(until, p.status()) {
		r := reply()
		s.mu.Unlock()
		return r
	}
	last, occ := s.eventSeq, p.occupant
	s.mu.Unlock()
	return s.waitFor(c, deadlineFrom(params.TimeoutMs, time.Now()), func(expired bool) []byte {
		if p.gone || p.occupant != occ {
			return notRunning(id)
		}
		hit := slices.Contains(until, p.status())
		for _, e := range s.events {
			if e.seq > last && e.kind == "pane_agent_status_changed" && e.paneID == p.id && slices.Contains(until, e.status) {
				hit = true
			}
		}
		last = s.eventSeq
		if hit {
			return reply()
		}
		if expired {
			return errorLine(id, "timeout", "timed out waiting for agent status")
		}
		return nil
	})
}

func (s *Server) waitForOutput(c *connCtx) []byte {
	var params struct {
		PaneID    string      `json:"pane_id"`
		Source    string      `json:"source"`
		Lines     *int        `json:"lines"`
		Match     outputMatch `json:"match"`
		TimeoutMs *uint64     `json:"timeout_ms"`
	}
	_ = json.Unmarshal(c.req.params, &params)
	id := c.req.id
	re, err := compileMatch(params.Match)
	if err != nil {
		return errorLine(id, "invalid_regex", err.Error())
	}
	source := params.Source
	if source == "recent" {
		source = "recent_unwrapped"
	}
	return s.waitFor(c, deadlineFrom(params.TimeoutMs, time.Now()), func(expired bool) []byte {
		p := s.panes[params.PaneID]
		if p == nil {
			return errorLine(id, "pane_not_found", "pane "+params.PaneID+" not found")
		}
		text, trunc := s.readLocked(p, source, params.Lines)
		if line, ok := matchOutput(text, params.Match, re); ok {
			read := readResult{PaneID: p.id, WorkspaceID: p.ws.id, TabID: p.tab.id, Source: source, Format: "text", Text: text, Truncated: trunc}
			return okLine(id, obj{{"type", "output_matched"}, {"pane_id", p.id}, {"revision", 0}, {"matched_line", line}, {"read", read}})
		}
		if expired {
			return errorLine(id, "timeout", "timed out waiting for output match")
		}
		return nil
	})
}
