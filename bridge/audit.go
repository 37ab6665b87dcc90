package bridge

import (
	"time"
	"unicode/utf8"

	"github.com/herdbridge/herdbridge/bridge/audit"
)

// The core's side of the audit log (bridge/audit keeps the file): each
// hop it observes becomes an audit.Record (observe.go writes it), and a
// trace reads its own log back (trace.go) as AuditRecords, bounded here.

// AuditRecord is one hop of a message as the audit log holds it:
// metadata only, never a body. It is audit.Record with the core's typed
// hop and kind, under the same JSON names: what a trace lists, and what a
// TRACE_ANSWER carries from another host.
type AuditRecord struct {
	At        time.Time `json:"at"`
	Dir       string    `json:"dir"` // out: published by this gateway; in: arrived at it or handled here
	Hop       Hop       `json:"hop,omitempty"`
	Kind      Kind      `json:"kind,omitempty"`
	MsgID     string    `json:"msgId,omitempty"`
	TraceID   string    `json:"traceId,omitempty"`
	Corr      string    `json:"corr,omitempty"`
	From      string    `json:"from,omitempty"`
	To        string    `json:"to,omitempty"`
	Host      string    `json:"host,omitempty"`
	Key       string    `json:"key,omitempty"`
	Entity    string    `json:"entity,omitempty"`
	Verdict   string    `json:"verdict"` // published | spooled: … | publish failed: … | accepted | refused: <reason> | the hop's status
	LatencyMs float64   `json:"latencyMs,omitempty"`
}

// auditRecord is the audit line of e.
func auditRecord(e Event) audit.Record {
	r := audit.Record{At: e.At, Dir: "in", Hop: string(e.Hop), Kind: string(e.Kind), MsgID: e.MsgID, TraceID: e.TraceID, Corr: e.Corr,
		From: e.From, To: e.To, Host: e.Host, Key: e.Key, Entity: e.Entity, Verdict: e.Status,
		LatencyMs: float64(e.Latency.Microseconds()) / 1000}
	switch e.Hop {
	case HopPublish:
		r.Dir = "out"
	case HopAccept:
		r.Verdict = "accepted"
	case HopRefuse:
		r.Verdict = "refused: " + e.Status
	}
	return r
}

// TraceWindow bounds how much of the audit log one trace reads on one
// host: at about 370 bytes a record, the last ~180 000 hops (reading
// them takes about a quarter of a second: audit's BenchmarkScan).
const TraceWindow = 64 << 20

// TraceMaxHops bounds the hops one host reports for one id (the earliest
// are kept); it keeps an answer well under MaxBodyBytes.
const TraceMaxHops = 1000

// traceVerdictBytes bounds a hop's verdict in a trace (a publish error can
// be long; the trace needs its gist).
const traceVerdictBytes = 200

// TraceScope says how far back one host's search reached.
type TraceScope struct {
	Files []string  `json:"files"`           // the log files read (base names), oldest first
	Bytes int64     `json:"bytes"`           // how many bytes of them were read
	Since time.Time `json:"since,omitempty"` // the oldest record read: hops before it are not seen
	Whole bool      `json:"whole"`           // the whole log was read: nothing older exists
}

// scanAudit reads the hops of id — a traceId or a msgId, in canonical
// form — from the audit log at path, at most window bytes back (audit.Scan:
// the records carrying id as traceId, msgId or corr, and every record of
// their msgIds), at most TraceMaxHops of them. Hops are in the log's
// order; truncated means more matched and the earliest were kept.
func scanAudit(path, id string, window int64) (hops []AuditRecord, scope TraceScope, truncated bool, err error) {
	recs, s, truncated, err := audit.Scan(path, id, window, TraceMaxHops)
	if err != nil {
		return nil, TraceScope(s), false, err
	}
	for i := range recs {
		hops = append(hops, traceHop(&recs[i]))
	}
	return hops, TraceScope(s), truncated, nil
}

// traceHop is the core's view of a record a trace read, its verdict
// clipped to its gist.
func traceHop(r *audit.Record) AuditRecord {
	return AuditRecord{At: r.At, Dir: r.Dir, Hop: Hop(r.Hop), Kind: Kind(r.Kind), MsgID: r.MsgID, TraceID: r.TraceID, Corr: r.Corr,
		From: r.From, To: r.To, Host: r.Host, Key: r.Key, Entity: r.Entity, Verdict: clipUTF8(r.Verdict, traceVerdictBytes),
		LatencyMs: r.LatencyMs}
}

// clipUTF8 cuts s to at most n bytes on a rune boundary, marking the cut.
func clipUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
