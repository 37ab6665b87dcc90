package herdr

// Agent statuses (API.md §3).
const (
	StatusIdle    = "idle"
	StatusWorking = "working"
	StatusBlocked = "blocked"
	StatusDone    = "done"
	StatusUnknown = "unknown"
)

// Ready reports whether an agent in status s can take a prompt: idle, or
// done (idle but not yet seen in a UI).
func Ready(s string) bool { return s == StatusIdle || s == StatusDone }

// Pong is the reply to ping.
type Pong struct {
	Version      string          `json:"version"`
	Protocol     int             `json:"protocol"`
	Capabilities map[string]bool `json:"capabilities,omitempty"`
}

// PaneInfo is herdr's pane record (the fields the bridge uses).
type PaneInfo struct {
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

// AgentInfo is herdr's record of an agent in a pane.
type AgentInfo struct {
	TerminalID       string `json:"terminal_id"`
	Name             string `json:"name,omitempty"`
	Agent            string `json:"agent,omitempty"`
	AgentStatus      string `json:"agent_status"`
	WorkspaceID      string `json:"workspace_id"`
	TabID            string `json:"tab_id"`
	PaneID           string `json:"pane_id"`
	Focused          bool   `json:"focused"`
	LaunchPending    bool   `json:"launch_pending,omitempty"`
	InteractiveReady bool   `json:"interactive_ready,omitempty"`
	StateChangeSeq   uint64 `json:"state_change_seq"`
	Cwd              string `json:"cwd,omitempty"`
	Revision         uint64 `json:"revision"`
}

// PaneRead is the result of pane.read.
type PaneRead struct {
	PaneID    string `json:"pane_id"`
	Source    string `json:"source"`
	Format    string `json:"format"`
	Text      string `json:"text"`
	Truncated bool   `json:"truncated"`
}

// Read sources.
const (
	SourceVisible   = "visible"
	SourceRecent    = "recent"
	SourceUnwrapped = "recent_unwrapped"
	SourceDetection = "detection"
)
