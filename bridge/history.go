package bridge

import (
	"log/slog"
	"time"

	"github.com/herdbridge/herdbridge/bridge/history"
)

// History: an opt-in transcript per entity of the messages it sent and
// received, bodies included (they are its own), kept by its own gateway in
// <Dir>/<name>.jsonl, capped by size and age, read by bridge_history
// without consuming anything. The files, their writer and their caps are
// bridge/history's; the core decides which messages are kept and for whom
// (historyread.go), and converts its envelopes to history.Entry and back
// (historyentry.go). The send and delivery paths only queue a record, so
// a send never waits for the disk.

// HistoryConfig says where and how much history is kept.
type HistoryConfig struct {
	// Dir holds the history files; empty: no history on this gateway.
	Dir string
	// All keeps every local entity's history (--history); otherwise only
	// the entities registered with history on.
	All bool
	// MaxBytes caps one entity's file (default 16 MiB): past it the oldest
	// entries go, down to three quarters of it.
	MaxBytes int64
	// MaxAge: older entries are not returned, and are dropped from the
	// file (default 30 days).
	MaxAge time.Duration
}

func (h *HistoryConfig) defaults() {
	if h.MaxBytes <= 0 {
		h.MaxBytes = history.DefaultMaxBytes
	}
	if h.MaxAge <= 0 {
		h.MaxAge = history.DefaultMaxAge
	}
}

// historyKinds are the kinds a history keeps: messages, and the notices
// an entity drains (never a receipt such as INJECTED).
var historyKinds = map[Kind]bool{KindSend: true, KindAsk: true, KindReply: true, KindAnswer: true, KindBroadcast: true,
	KindFailed: true, KindAbandoned: true, KindTooLate: true, KindNoWaiter: true, KindMissedAsk: true}

// newHistory is the history writer of cfg, naming entities with names.
func newHistory(cfg HistoryConfig, log *slog.Logger, now func() time.Time, names func(string) string) *history.Log {
	return history.New(history.Config{Dir: cfg.Dir, MaxBytes: cfg.MaxBytes, MaxAge: cfg.MaxAge}, log, now, names)
}

// checkHistoryName refuses a purge of a name no entity can have.
func checkHistoryName(name string) error {
	if name != "" && !ValidName(name) {
		return userErr("%s is not an entity name", Clip(name))
	}
	return nil
}

// PurgeHistoryFiles deletes the history file of the entity called name in
// dir, or every one with name "", and says how many it deleted. A running
// gateway purges through its core (it may hold the files open).
func PurgeHistoryFiles(dir, name string) (int, error) {
	if err := checkHistoryName(name); err != nil {
		return 0, err
	}
	return history.PurgeFiles(dir, name)
}
