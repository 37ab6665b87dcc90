package bridge

import "context"

// Injector types briefs into a worker's herdr pane: the forward path of
// SPEC §4. The herdr package implements it; the core decides what waits
// and in which order (the pane queues, panequeue.go), the Injector only
// how a pane is judged ready and how a brief is typed. The core calls it
// from the one goroutine that owns a pane's queue, so calls for one pane
// never overlap; calls for different panes run concurrently.
type Injector interface {
	// Inject types b once the pane is ready, after calling b.Typing, and
	// reports the highest rung it observed. A pane that is not ready (the
	// agent busy, a dialog open, a draft someone typed in the composer) is
	// reported StatusNotReady with nothing typed: the brief stays queued.
	// Bounded by ctx.
	Inject(ctx context.Context, b Brief) InjectReceipt
	// Resubmit is for b, typed earlier and reported uncertain: if the pane
	// is ready and its composer holds exactly b's text, it presses Enter
	// once (never pastes again) and reports StatusSubmitted when the turn
	// started. StatusNotReady: look again later; anything else: b is not
	// (or no longer) in the composer, or the Enter did not start a turn.
	Resubmit(ctx context.Context, b Brief) InjectReceipt
}

// Brief is one message for the forward path.
type Brief struct {
	To       Entity    // the worker, with its pane id
	Env      *Envelope // SEND or BROADCAST
	FromName string    // the sender's name, for the prompt's header
	// Provenance is who sent it as this gateway verified it (name@host,
	// role, how it was checked), for the prompt's header: the model in
	// the pane reads it in herdbridge's words, never in the sender's.
	Provenance Provenance
	// Typing must be called right before the first byte is typed: the
	// core records durably that typing began, so a crash from then on
	// reports the brief "uncertain" and never types it again. If it
	// returns an error, nothing may be typed.
	Typing func() error
}

// StatusNotReady is an Injector's "nothing typed: the pane is not ready";
// it is never a tool status (the sender hears StatusQueued).
const StatusNotReady = "not_ready"

// InjectReceipt is what the forward path observed.
type InjectReceipt struct {
	Status string // StatusSubmitted | StatusInjected | StatusUncertain | StatusFailed | StatusNotReady
	// Reason is a sentence for the sender; for StatusNotReady it names
	// the worker's state ("w is working", "w waits on a dialog", …).
	Reason string
	// Waits is, for StatusNotReady, what the pane waits on: the agent's
	// status ("working", "blocked", …) or WaitsDraft.
	Waits string
}

// WaitsDraft is InjectReceipt.Waits for a composer holding a draft that
// is not ours: never typed over.
const WaitsDraft = "draft"

// WaitsOwnDraft is InjectReceipt.Waits for a composer holding text
// herdbridge typed earlier and never saw submitted: never typed over
// either, and waited on for a bound only (panerecover.go).
const WaitsOwnDraft = "own_draft"

// forwards reports whether st's briefs go through the forward path. Called
// with st.mu held.
func (c *Core) forwards(st *entState) bool {
	return c.cfg.Injector != nil && st.PaneID != "" && st.Role == RoleWorker
}

// LateReceipt opens the reason of an INJECTED that comes after the brief
// was already reported (uncertain, then found in the composer and
// submitted): held for the sender like any receipt it awaits.
const LateReceipt = "late receipt: "

// WaitsDialog is InjectReceipt.Waits for an agent whose dialog waits for
// an answer (herdr's status blocked).
const WaitsDialog = "blocked"
