package herdrtest

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"
)

// layout.apply (API.md §4.6; herdr's src/app/api/layouts.rs
// handle_layout_apply). It builds a new tab from a LayoutNode tree in the
// workspace_id workspace (else the focused one), or in place of tab_id,
// whose panes are then closed (pane_closed each, then tab_closed). Each
// pane leaf runs its argv "command" directly, without a shell, or the
// default shell when it has none; "cwd", "env" and "label" apply to that
// pane. A split's second subtree gets its panes after its first's root,
// in herdr's numbering order. Events, in herdr's order: the replaced tab's
// closes, tab_created, pane_created for every pane, layout_updated. The
// reply is layout_apply {layout: {workspace_id, tab_id, zoomed,
// focused_pane_id, root}} where root mirrors the request tree with each
// leaf's pane_id, label, cwd and command (env is never echoed).
//
// The simulated command: when its executable (argv[0]'s base name) is an
// agent herdr recognises ("claude", "codex", "cursor-agent", …), or when
// env holds HERDR_AGENT=<kind> for a kind herdr knows (the wrapper hint,
// which wins over the executable), the pane hosts that agent: it is
// detected after the start delay (WithStartDelay) and is then idle — done
// while unseen, or blocked under SetTrustDialog — with no launch_pending and never interactive_ready (only
// agent.start launches are Managed). Until then agent.get answers
// agent_not_found. Any other command (or an unknown HERDR_AGENT label,
// which herdr ignores) is a custom process: agent_status "unknown", no
// agent; custom agents report themselves with pane.report_agent. Lines
// typed into a command pane are echoed and go nowhere; there is no shell
// to run them, so agent.start refuses the pane (agent_pane_busy). When the
// command's process ends (ExitPane, or ExitAgent for an agent command) the
// pane goes away with pane_exited.
//
// Simplifications: the layout_updated snapshot lists the panes side by
// side with an empty "splits" list (as for pane.split), and the fake does
// not keep the tree for later layout calls.
type layoutNode struct {
	Type string `json:"type"`
	// pane
	Label   *string           `json:"label"`
	Cwd     *string           `json:"cwd"`
	Command *[]string         `json:"command"` // nil: the default shell
	Env     map[string]string `json:"env"`
	// split
	Direction string      `json:"direction"`
	Ratio     float32     `json:"ratio"`
	First     *layoutNode `json:"first"`
	Second    *layoutNode `json:"second"`
}

const (
	maxLayoutPanes = 24 // MAX_LAYOUT_PANES
	maxLayoutDepth = 16 // MAX_LAYOUT_DEPTH
)

func (n *layoutNode) firstLeaf() *layoutNode {
	if n.Type == "split" {
		return n.First.firstLeaf()
	}
	return n
}

// validate is validate_layout_tree: depth, pane count, commands and env.
func (n *layoutNode) validate(depth int, panes *int) error {
	if depth > maxLayoutDepth {
		return fmt.Errorf("layout depth is %d; maximum is %d", depth, maxLayoutDepth)
	}
	if n.Type == "split" {
		if err := n.First.validate(depth+1, panes); err != nil {
			return err
		}
		return n.Second.validate(depth+1, panes)
	}
	*panes++
	if *panes > maxLayoutPanes {
		return fmt.Errorf("layout has more than %d panes", maxLayoutPanes)
	}
	if n.Command != nil && len(*n.Command) == 0 {
		return fmt.Errorf("pane command must not be empty")
	}
	for k, v := range n.Env {
		switch {
		case k == "":
			return fmt.Errorf("env key must not be empty")
		case strings.Contains(k, "="):
			return fmt.Errorf("env key %s must not contain '='", k)
		case strings.Contains(k, "\x00"):
			return fmt.Errorf("env key must not contain NUL bytes")
		case strings.Contains(v, "\x00"):
			return fmt.Errorf("env value for %s must not contain NUL bytes", k)
		}
	}
	return nil
}

func (s *Server) layoutApplyLocked(id string, raw json.RawMessage) []byte {
	var params struct {
		WorkspaceID *string    `json:"workspace_id"`
		TabID       *string    `json:"tab_id"`
		TabLabel    *string    `json:"tab_label"`
		Focus       bool       `json:"focus"`
		Root        layoutNode `json:"root"`
	}
	_ = json.Unmarshal(raw, &params)

	var replace *tab
	if params.TabID != nil {
		if replace = s.tabLocked(*params.TabID); replace == nil {
			return errorLine(id, "tab_not_found", "tab "+*params.TabID+" not found")
		}
		if params.WorkspaceID != nil {
			return errorLine(id, "invalid_target", "use either tab_id or workspace_id, not both")
		}
	}
	var ws *workspace
	switch {
	case replace != nil:
		ws = replace.ws
	case params.WorkspaceID != nil:
		if ws = s.workspaceLocked(*params.WorkspaceID); ws == nil {
			return errorLine(id, "workspace_not_found", "workspace "+*params.WorkspaceID+" not found")
		}
	default:
		if ws = s.focusedWS; ws == nil {
			return errorLine(id, "workspace_not_found", "no active workspace")
		}
	}
	root := &params.Root
	n := 0
	if err := root.validate(1, &n); err != nil {
		return errorLine(id, "invalid_layout", err.Error())
	}

	label := ""
	if params.TabLabel != nil {
		label = *params.TabLabel
	} else if replace != nil && replace.custom {
		label = replace.label
	}
	replaceWasActive := replace != nil && s.focusedWS == ws && ws.activeTab == replace

	t := s.newTabLocked(ws, label)
	leaves := map[*layoutNode]*pane{}
	rootLeaf := root.firstLeaf()
	cwd := ""
	if rootLeaf.Cwd != nil {
		cwd = *rootLeaf.Cwd
	}
	first := s.newPaneLocked(t, cwd)
	s.stageLayoutLocked(root, first, leaves)
	for leaf, p := range leaves {
		s.launchLeafLocked(p, leaf)
	}

	if replace != nil {
		if ws.activeTab == replace {
			ws.activeTab = t
		}
		s.removeTabLocked(replace)
	}
	if params.Focus || replaceWasActive {
		s.focusedWS, ws.activeTab = ws, t
	}
	s.emitLocked("tab_created", "", "", obj{{"tab", s.tabInfoLocked(t)}})
	for _, p := range t.panes {
		s.emitLocked("pane_created", p.id, "", obj{{"pane", s.paneInfoLocked(p)}})
	}
	s.emitLayoutLocked(t)

	desc := obj{{"workspace_id", ws.id}, {"tab_id", t.id}, {"zoomed", false},
		{"focused_pane_id", t.active.id}, {"root", describeLayout(root, leaves)}}
	return okLine(id, obj{{"type", "layout_apply"}, {"layout", desc}})
}

// stageLayoutLocked is stage_layout_node: at a split, the second subtree's
// first pane is created (cwd: its own, else the split pane's), then both
// subtrees are staged.
func (s *Server) stageLayoutLocked(n *layoutNode, target *pane, leaves map[*layoutNode]*pane) {
	if n.Type != "split" {
		leaves[n] = target
		if n.Label != nil {
			target.label = strings.TrimSpace(*n.Label)
		}
		return
	}
	cwd := target.cwd
	if c := n.Second.firstLeaf().Cwd; c != nil {
		cwd = *c
	}
	np := s.newPaneLocked(target.tab, cwd)
	s.stageLayoutLocked(n.First, target, leaves)
	s.stageLayoutLocked(n.Second, np, leaves)
}

// launchLeafLocked starts a leaf's process: its command, or the shell.
func (s *Server) launchLeafLocked(p *pane, leaf *layoutNode) {
	if leaf.Command == nil {
		s.startShellLocked(p, leaf.Env)
		return
	}
	p.command = append([]string(nil), (*leaf.Command)...)
	p.env = copyEnv(leaf.Env)
	kind := ""
	if hint, ok := leaf.Env["HERDR_AGENT"]; ok {
		if _, known := agentExecutables[hint]; known {
			kind = hint
		}
	}
	if kind == "" {
		kind = executableKinds[path.Base(p.command[0])]
	}
	if kind == "" {
		return // a custom process: herdr detects no agent
	}
	s.afterLocked(s.startDelay, func() {
		if p.gone || p.agent != "" {
			return
		}
		p.agent, p.known, p.name, p.managed = kind, true, "", false
		p.pending, p.ready = false, false
		p.occupant++
		p.shellBPM = p.bracketed
		p.bracketed = true // agent TUIs enable bracketed paste
		p.state = "unknown"
		p.revision++
		s.emitLocked("pane_agent_detected", p.id, "", obj{{"pane_id", p.id}, {"workspace_id", p.ws.id}, {"agent", kind}})
		s.upLocked(p)
	})
}

// startShellLocked starts a new pane's default shell: env is recorded, and
// while the shell's rc files run (SetShellStartup) the pane is busy.
func (s *Server) startShellLocked(p *pane, env map[string]string) {
	p.env = copyEnv(env)
	if s.shellStartup <= 0 {
		return
	}
	p.rcBusy = true
	s.afterLocked(s.shellStartup, func() {
		p.rcBusy = false
		s.notifyLocked()
	})
}

func copyEnv(env map[string]string) map[string]string {
	if len(env) == 0 {
		return nil
	}
	out := make(map[string]string, len(env))
	for k, v := range env {
		out[k] = v
	}
	return out
}

// removeTabLocked closes a whole tab as herdr's tab removal does:
// pane_closed for each pane, then tab_closed (no layout_updated). The
// caller keeps the workspace non-empty.
func (s *Server) removeTabLocked(t *tab) {
	ws := t.ws
	for _, p := range append([]*pane(nil), t.panes...) {
		p.gone = true
		p.turnGen++
		delete(s.panes, p.id)
		for i, q := range s.paneOrder {
			if q == p {
				s.paneOrder = append(s.paneOrder[:i], s.paneOrder[i+1:]...)
				break
			}
		}
		s.emitLocked("pane_closed", p.id, "", obj{{"pane_id", p.id}, {"workspace_id", ws.id}})
	}
	t.panes, t.active = nil, nil
	s.dropTabLocked(ws, t)
	s.notifyLocked()
}

// describeLayout is the reply's LayoutNode: the request tree with each
// leaf's pane (env is not echoed: herdr skips an empty map).
func describeLayout(n *layoutNode, leaves map[*layoutNode]*pane) obj {
	if n.Type == "split" {
		return obj{{"type", "split"}, {"direction", n.Direction}, {"ratio", n.Ratio},
			{"first", describeLayout(n.First, leaves)}, {"second", describeLayout(n.Second, leaves)}}
	}
	p := leaves[n]
	o := obj{{"type", "pane"}, {"pane_id", p.id}}
	if p.label != "" {
		o = append(o, kv{"label", p.label})
	}
	if p.cwd != "" {
		o = append(o, kv{"cwd", p.cwd})
	}
	if p.command != nil {
		o = append(o, kv{"command", append([]string(nil), p.command...)})
	}
	return o
}
