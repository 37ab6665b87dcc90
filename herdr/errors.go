package herdr

import (
	"errors"
	"fmt"
)

// Error is an error reply from herdr. It matches the sentinel of its code
// with errors.Is (ErrPaneNotFound, ErrAgentBlocked, …).
type Error struct {
	Method  string
	Code    string
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("herdr: %s: %s: %s", e.Method, e.Code, e.Message)
}

// Is matches the sentinel for e.Code.
func (e *Error) Is(target error) bool {
	s, ok := target.(*sentinel)
	if !ok {
		return false
	}
	if s.code == e.Code {
		return true
	}
	// an old server answers a method it lacks with invalid_request "unknown variant"
	return s == ErrUnknownMethod && e.Code == "invalid_request" && containsFold(e.Message, "unknown variant")
}

type sentinel struct{ code string }

func (s *sentinel) Error() string { return "herdr: " + s.code }

// Sentinels for the error codes the bridge acts on (API.md §1.3).
var (
	ErrInvalidRequest    = &sentinel{"invalid_request"}
	ErrInvalidParams     = &sentinel{"invalid_params"}
	ErrUnknownMethod     = &sentinel{"unknown_method"} // invalid_request "unknown variant"
	ErrPaneNotFound      = &sentinel{"pane_not_found"}
	ErrAgentNotFound     = &sentinel{"agent_not_found"}
	ErrAgentAmbiguous    = &sentinel{"agent_target_ambiguous"}
	ErrAgentNotReady     = &sentinel{"agent_not_ready"}
	ErrAgentBlocked      = &sentinel{"agent_blocked"}
	ErrAgentNotRunning   = &sentinel{"agent_not_running"}
	ErrPromptStalled     = &sentinel{"agent_prompt_stalled"}
	ErrPromptFailed      = &sentinel{"agent_prompt_failed"}
	ErrEmptyPrompt       = &sentinel{"empty_agent_prompt"}
	ErrAgentPaneBusy     = &sentinel{"agent_pane_busy"}
	ErrAgentNameTaken    = &sentinel{"agent_name_taken"}
	ErrUnsupportedKind   = &sentinel{"unsupported_agent_kind"}
	ErrTimeout           = &sentinel{"timeout"}
	ErrPaneSendFailed    = &sentinel{"pane_send_failed"}
	ErrServerUnavailable = &sentinel{"server_unavailable"}

	ErrWorkspaceNotFound     = &sentinel{"workspace_not_found"}
	ErrTabNotFound           = &sentinel{"tab_not_found"}
	ErrNoActiveWorkspace     = &sentinel{"no_active_workspace"}
	ErrNoActivePane          = &sentinel{"no_active_pane"}
	ErrPaneSplitFailed       = &sentinel{"pane_split_failed"}
	ErrInvalidKey            = &sentinel{"invalid_key"}
	ErrInvalidEnv            = &sentinel{"invalid_env"}
	ErrConfirmationRequired  = &sentinel{"confirmation_required"}
	ErrInvalidRegex          = &sentinel{"invalid_regex"}
	ErrUnsupportedEventWait  = &sentinel{"unsupported_event_wait_match"}
	ErrAgentSendKeysFailed   = &sentinel{"agent_send_keys_failed"}
	ErrInvalidAgentName      = &sentinel{"invalid_agent_name"}
	ErrInvalidAgentArgument  = &sentinel{"invalid_agent_argument"}
	ErrInvalidAgentTimeout   = &sentinel{"invalid_agent_timeout"}
	ErrAgentPaneNotFound     = &sentinel{"agent_pane_not_found"}
	ErrAgentPaneUnavailable  = &sentinel{"agent_pane_unavailable"}
	ErrAgentStartInputFailed = &sentinel{"agent_start_input_failed"}
	ErrAgentLaunchPending    = &sentinel{"agent_launch_pending"}
	ErrAgentNotIdle          = &sentinel{"agent_not_idle"}
	ErrAgentKindMismatch     = &sentinel{"agent_kind_mismatch"}
	ErrInternal              = &sentinel{"internal_error"}
)

// NotRunningError is herdr not listening on its socket.
type NotRunningError struct {
	Path string
	Err  error
}

func (e *NotRunningError) Error() string {
	return fmt.Sprintf("herdr is not running (nothing answers on %s: %v): start it with `herdr` (or `herdr server` for a headless one), or point HERDR_SOCKET_PATH at its socket", e.Path, e.Err)
}

func (e *NotRunningError) Unwrap() error { return e.Err }

// ProtocolError is a reply that is not what herdr's protocol says: it does
// not parse, has the wrong id, or the wrong result type.
type ProtocolError struct {
	Method string
	Msg    string
	Err    error
}

func (e *ProtocolError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("herdr: %s: bad reply: %s: %v", e.Method, e.Msg, e.Err)
	}
	return fmt.Sprintf("herdr: %s: bad reply: %s", e.Method, e.Msg)
}

func (e *ProtocolError) Unwrap() error { return e.Err }

// IsNotRunning reports whether err means herdr is not running.
func IsNotRunning(err error) bool {
	var nr *NotRunningError
	return errors.As(err, &nr)
}

func containsFold(s, sub string) bool {
	n := len(sub)
	for i := 0; i+n <= len(s); i++ {
		match := true
		for j := 0; j < n; j++ {
			a, b := s[i+j], sub[j]
			if 'A' <= a && a <= 'Z' {
				a += 'a' - 'A'
			}
			if 'A' <= b && b <= 'Z' {
				b += 'a' - 'A'
			}
			if a != b {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}
