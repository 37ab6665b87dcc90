package bridge

import (
	"time"

	"github.com/herdbridge/herdbridge/bridge/history"
)

// A history entry as the core speaks of it (HistoryEntry: what
// bridge_history returns), and its conversions to and from the record
// bridge/history keeps in the file (history.Entry). The two carry the same
// fields under the same JSON names; the core's has a typed Kind.

// HistoryEntry is one message an entity sent (dir "out") or received
// (dir "in"), as its history keeps it.
type HistoryEntry struct {
	TS       time.Time `json:"ts"` // sent (out) or arrived (in)
	Dir      string    `json:"dir"`
	Kind     Kind      `json:"kind"`
	MsgID    string    `json:"msgId"`
	From     string    `json:"from"`
	FromName string    `json:"fromName,omitempty"`
	To       string    `json:"to"`
	ToName   string    `json:"toName,omitempty"`
	Body     string    `json:"body"`
	TurnID   string    `json:"turnId,omitempty"`
	Corr     string    `json:"corr,omitempty"`
	TraceID  string    `json:"traceId,omitempty"`
}

// History directions.
const (
	HistoryOut = history.Out
	HistoryIn  = history.In
)

// historyRecord is env's record in a history, in direction dir, stamped
// ts: when it was sent (out) or arrived (in). Its body and names are left
// to the writer, off the send path.
func historyRecord(dir string, ts time.Time, env *Envelope) history.Entry {
	return history.Entry{TS: ts.UTC(), Dir: dir, Kind: string(env.Kind), MsgID: env.MsgID, From: env.From, To: env.To,
		TurnID: env.TurnID, Corr: env.Corr, TraceID: env.TraceID}
}

// historyEntry is the core's view of a record read back from a history.
func historyEntry(e *history.Entry) HistoryEntry {
	return HistoryEntry{TS: e.TS, Dir: e.Dir, Kind: Kind(e.Kind), MsgID: e.MsgID, From: e.From, FromName: e.FromName,
		To: e.To, ToName: e.ToName, Body: e.Body, TurnID: e.TurnID, Corr: e.Corr, TraceID: e.TraceID}
}
