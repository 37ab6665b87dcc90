package bridge

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Statuses carried by tool results.
const (
	StatusConfirmed       = "confirmed"        // the transport accepted it
	StatusQueued          = "queued"           // accepted; waits in the worker's pane queue until it is ready, or at this gateway until the broker returns
	StatusInjected        = "injected"         // typed into the worker's pane
	StatusSubmitted       = "submitted"        // the worker started the turn
	StatusUncertain       = "uncertain"        // typed, turn start not observed
	StatusReplied         = "replied"          // an open send got its reply
	StatusAsked           = "asked"            // an open send got an ASK instead
	StatusPending         = "pending"          // the wait cap ran out; call again
	StatusAnswered        = "answered"         // an ask got its answer
	StatusDelivered       = "delivered"        // an answer reached the waiting turn
	StatusNoWaiter        = "no_waiter"        // nobody was waiting for the ask
	StatusTooLate         = "too_late"         // the turn no longer waited
	StatusAlreadyAnswered = "already_answered" // the turn took another answer
	StatusAbandoned       = "abandoned"        // the counterpart went away
	StatusExpired         = "expired"          // expiresAt passed
	StatusFailed          = "failed"           // dead-lettered, refused, or not injected
	StatusDrained         = "drained"          // poll returned messages
	StatusPeeked          = "peeked"           // poll peeked without consuming
	StatusEmpty           = "empty"            // poll found nothing
)

// UserError is a mistake the caller can fix; MCP turns it into a tool
// error (isError) carrying Msg.
type UserError struct{ Msg string }

func (e *UserError) Error() string { return e.Msg }

func userErr(format string, a ...any) error { return &UserError{Msg: fmt.Sprintf(format, a...)} }

// Message is a message as a tool result shows it.
type Message struct {
	MsgID    string    `json:"msgId"`
	Kind     Kind      `json:"kind"`
	From     string    `json:"from"`
	FromName string    `json:"fromName"`
	To       string    `json:"to"`
	Body     string    `json:"body"`
	TurnID   string    `json:"turnId,omitempty"`
	Corr     string    `json:"corr,omitempty"` // the msgId this one answers (FAILED, ABANDONED, …)
	TS       time.Time `json:"ts"`
	TraceID  string    `json:"traceId,omitempty"`
	// Redelivered: handed to an earlier call whose client may have read it
	// but never confirmed it (README "Semantics"): a possible duplicate.
	Redelivered bool `json:"redelivered,omitempty"`
	// Provenance is who sent it as this gateway verified it (provenance.go):
	// what a model may trust, where the body is only data.
	Provenance Provenance `json:"provenance"`
}

// Result is the outcome of a tool call.
type Result struct {
	Status  string       `json:"status"`
	MsgID   string       `json:"msgId,omitempty"`
	TraceID string       `json:"traceId,omitempty"`
	TurnID  string       `json:"turnId,omitempty"`
	SpawnID string       `json:"spawnId,omitempty"` // bridge_spawn: the new worker's gid
	Phases  []SpawnPhase `json:"phases,omitempty"`  // bridge_spawn: the steps it went through
	History *HistoryView `json:"history,omitempty"` // bridge_history
	Target  string       `json:"target,omitempty"`
	Reason  string       `json:"reason,omitempty"` // herdbridge's own words, never a sender's
	// Fence is the nonce of this result's fences (set by the MCP layer,
	// mcp/fence.go): fresh for every result and in none of the text its
	// senders wrote, it is what the text content quotes every body
	// between; a body cannot know it, so cannot close its quote.
	Fence    string       `json:"fence,omitempty"`
	Messages []Message    `json:"messages,omitempty"`
	Held     *HeldSummary `json:"held,omitempty"` // what else waits for the caller
	// More: how many more held messages match this poll than it carries
	// (cut by max or by the result's byte budget); Next says how to get them.
	More int    `json:"more,omitempty"`
	Next string `json:"next,omitempty"` // what to call next
	// Deduped: a repeat of an earlier call with the same request_id; it
	// published nothing, and shows that call's message and current status.
	Deduped bool `json:"deduped,omitempty"`
}

// Progress is told, while a call waits, how long it has waited of how long.
type Progress func(waited, of time.Duration, msg string)

// message is env as a tool result shows it.
func (c *Core) message(env *Envelope) Message {
	return Message{MsgID: env.MsgID, Kind: env.Kind, From: env.From, FromName: c.nameOf(env.From), To: env.To, Body: string(env.Body),
		TurnID: env.TurnID, Corr: env.Corr, TS: env.TS.UTC(), TraceID: env.TraceID, Provenance: c.provenance(env)}
}

// Excerpt is the start of a message, quoted, for failure reports that must
// say which message failed.
func Excerpt(body string) string {
	body = strings.Join(strings.Fields(body), " ")
	if r := []rune(body); len(r) > 60 {
		body = string(r[:60]) + "…"
	}
	return strconv.Quote(body)
}

// injectedRung reads the rung an INJECTED receipt reports (its body is
// "<status>[: reason]"). The body is the worker's gateway's, maybe of
// another host: the reason is kept on one line (oneLine), so no gateway
// can add lines to its sender's result.
func injectedRung(body string) (string, string) {
	status, reason, _ := strings.Cut(body, ": ")
	switch status {
	case StatusQueued, StatusInjected, StatusSubmitted, StatusUncertain:
		return status, oneLine(reason)
	}
	return StatusInjected, oneLine(body)
}
