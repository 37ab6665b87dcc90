package herdr

import (
	"context"
	"time"
)

// Ping asks for the server's version and protocol.
func (c *Client) Ping(ctx context.Context) (Pong, error) {
	var p Pong
	err := c.Call(ctx, "ping", nil, &p, "pong")
	return p, err
}

// PaneList lists every pane.
func (c *Client) PaneList(ctx context.Context) ([]PaneInfo, error) {
	var r struct {
		Panes []PaneInfo `json:"panes"`
	}
	err := c.Call(ctx, "pane.list", nil, &r, "pane_list")
	return r.Panes, err
}

// PaneGet returns one pane; ErrPaneNotFound when it is gone.
func (c *Client) PaneGet(ctx context.Context, paneID string) (PaneInfo, error) {
	var r struct {
		Pane PaneInfo `json:"pane"`
	}
	err := c.Call(ctx, "pane.get", map[string]any{"pane_id": paneID}, &r, "pane_info")
	return r.Pane, err
}

// PaneRead reads text from a pane (lines 0: herdr's default).
func (c *Client) PaneRead(ctx context.Context, paneID, source string, lines int) (PaneRead, error) {
	p := map[string]any{"pane_id": paneID, "source": source, "format": "text"}
	if lines > 0 {
		p["lines"] = lines
	}
	var r struct {
		Read PaneRead `json:"read"`
	}
	err := c.Call(ctx, "pane.read", p, &r, "pane_read")
	return r.Read, err
}

// PaneSendInput writes text (bracketed when the app enabled it) and keys in
// one PTY write.
func (c *Client) PaneSendInput(ctx context.Context, paneID, text string, keys ...string) error {
	p := map[string]any{"pane_id": paneID, "text": text}
	if len(keys) > 0 {
		p["keys"] = keys
	}
	return c.Call(ctx, "pane.send_input", p, nil, "ok")
}

// PaneSendKeys sends named keys.
func (c *Client) PaneSendKeys(ctx context.Context, paneID string, keys ...string) error {
	return c.Call(ctx, "pane.send_keys", map[string]any{"pane_id": paneID, "keys": keys}, nil, "ok")
}

// PaneClose closes a pane and ends its process.
func (c *Client) PaneClose(ctx context.Context, paneID string) error {
	return c.Call(ctx, "pane.close", map[string]any{"pane_id": paneID}, nil, "ok")
}

// TabCreate opens a new tab running the default shell, without focus;
// returns its root pane.
func (c *Client) TabCreate(ctx context.Context, workspaceID, cwd, label string, env map[string]string) (PaneInfo, error) {
	p := map[string]any{"focus": false}
	if workspaceID != "" {
		p["workspace_id"] = workspaceID
	}
	if cwd != "" {
		p["cwd"] = cwd
	}
	if label != "" {
		p["label"] = label
	}
	if len(env) > 0 {
		p["env"] = env
	}
	var r struct {
		RootPane PaneInfo `json:"root_pane"`
	}
	err := c.Call(ctx, "tab.create", p, &r, "tab_created")
	return r.RootPane, err
}

// LayoutApplyCommand opens a new tab whose one pane runs argv directly
// (no shell), with cwd and env; returns the pane id.
func (c *Client) LayoutApplyCommand(ctx context.Context, workspaceID, label, cwd string, argv []string, env map[string]string) (string, error) {
	root := map[string]any{"type": "pane", "command": argv}
	if label != "" {
		root["label"] = label
	}
	if cwd != "" {
		root["cwd"] = cwd
	}
	if len(env) > 0 {
		root["env"] = env
	}
	p := map[string]any{"root": root, "focus": false}
	if workspaceID != "" {
		p["workspace_id"] = workspaceID
	}
	if label != "" {
		p["tab_label"] = label
	}
	var r struct {
		Layout struct {
			FocusedPaneID string `json:"focused_pane_id"`
			Root          struct {
				PaneID string `json:"pane_id"`
			} `json:"root"`
		} `json:"layout"`
	}
	if err := c.Call(ctx, "layout.apply", p, &r, "layout_apply"); err != nil {
		return "", err
	}
	if r.Layout.Root.PaneID != "" {
		return r.Layout.Root.PaneID, nil
	}
	return r.Layout.FocusedPaneID, nil
}

// AgentGet returns the agent in a pane (target: agent name or pane id).
func (c *Client) AgentGet(ctx context.Context, target string) (AgentInfo, error) {
	var r struct {
		Agent AgentInfo `json:"agent"`
	}
	err := c.Call(ctx, "agent.get", map[string]any{"target": target}, &r, "agent_info")
	return r.Agent, err
}

// AgentPrompt types text into a recognised agent (bracketed paste) and has
// herdr press Enter 300 ms later. Without wait the reply only means queued.
func (c *Client) AgentPrompt(ctx context.Context, target, text string) (AgentInfo, error) {
	var r struct {
		Agent AgentInfo `json:"agent"`
	}
	err := c.Call(ctx, "agent.prompt", map[string]any{"target": target, "text": text}, &r, "agent_prompted")
	return r.Agent, err
}

// AgentWait waits until the agent's status is one of until (herdr's
// default idle/done/blocked when empty), at most timeout.
func (c *Client) AgentWait(ctx context.Context, target string, until []string, timeout time.Duration) (AgentInfo, error) {
	p := map[string]any{"target": target, "timeout_ms": timeout.Milliseconds()}
	if len(until) > 0 {
		p["until"] = until
	}
	ctx, cancel := context.WithTimeout(ctx, timeout+2*time.Second) // margin over the server's own deadline
	defer cancel()
	var r struct {
		Agent AgentInfo `json:"agent"`
	}
	err := c.Call(ctx, "agent.wait", p, &r, "agent_info")
	return r.Agent, err
}

// AgentSendKeys sends keys to an agent in one write.
func (c *Client) AgentSendKeys(ctx context.Context, target string, keys ...string) error {
	return c.Call(ctx, "agent.send_keys", map[string]any{"target": target, "keys": keys}, nil, "ok")
}

// AgentStart launches a recognised agent kind with args in a shell pane.
// The reply does not mean ready: poll AgentGet for InteractiveReady.
func (c *Client) AgentStart(ctx context.Context, name, kind, paneID string, args []string, timeout time.Duration) (AgentInfo, error) {
	p := map[string]any{"name": name, "kind": kind, "pane_id": paneID}
	if len(args) > 0 {
		p["args"] = args
	}
	if timeout > 0 {
		p["timeout_ms"] = timeout.Milliseconds()
	}
	var r struct {
		Agent AgentInfo `json:"agent"`
	}
	err := c.Call(ctx, "agent.start", p, &r, "agent_started")
	return r.Agent, err
}
