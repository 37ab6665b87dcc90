package bridge

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/herdbridge/herdbridge/bridge/history"
)

// HistoryRequest is bridge_history: the caller's own history, filtered.
type HistoryRequest struct {
	Target string // only messages to or from this entity (name, name@host or gid)
	Since  string // only entries at or after this time: RFC 3339, or a duration back from now ("2h")
	Max    int    // the newest this many (default 50, at most 500)
	Query  string // only entries whose body contains this, case-insensitively
}

// HistoryView is what bridge_history returns.
type HistoryView struct {
	Entries []HistoryEntry `json:"entries"`
	// More: older entries matched too (raise max, or narrow since: a
	// result carries at most the newest that fit in its byte budget).
	More bool `json:"more,omitempty"`
	// Skipped counts lines of the file that could not be read (a line a
	// crash tore); Dropped, records this gateway could not write because
	// its history writer was behind.
	Skipped int    `json:"skipped,omitempty"`
	Dropped uint64 `json:"dropped,omitempty"`
}

// StatusHistory is bridge_history's status.
const StatusHistory = "history"

// historyOn reports whether st's messages are kept (st.mu not needed).
func (c *Core) historyOn(st *entState) bool {
	return c.hist != nil && (c.cfg.History.All || st.histOn.Load())
}

// recordOut keeps a message a local entity published in its history.
func (c *Core) recordOut(env *Envelope) {
	if c.hist == nil || !historyKinds[env.Kind] {
		return
	}
	if st := c.reg.get(env.From); st != nil && c.historyOn(st) {
		c.hist.Add(st.Name, historyRecord(HistoryOut, env.TS, env), env.Body)
	}
}

// recordIn keeps a message that reached st's inbox in its history.
func (c *Core) recordIn(st *entState, env *Envelope) {
	if c.hist != nil && historyKinds[env.Kind] && c.historyOn(st) {
		c.hist.Add(st.Name, historyRecord(HistoryIn, c.cfg.Now(), env), env.Body)
	}
}

// History is bridge_history for the entity gid: its history, read
// without consuming anything.
func (c *Core) History(ctx context.Context, gid string, req HistoryRequest) (*Result, error) {
	st, err := c.caller(gid)
	if err != nil {
		return nil, err
	}
	if c.hist == nil {
		return nil, userErr("this gateway keeps no history")
	}
	match, limit, err := c.historyFilter(req)
	if err != nil {
		return nil, err
	}
	if err := c.hist.Flush(ctx); err != nil {
		return nil, err
	}
	all, skipped, err := c.hist.Read(st.Name)
	if err != nil {
		return nil, fmt.Errorf("bridge: read the history of %s: %w", st.Name, err)
	}
	if len(all) == 0 && !c.historyOn(st) {
		return nil, userErr("history is off for %s: register it with --history (herdbridge mcp --history), or start its gateway with --history", st.Name)
	}
	// in arrival order: a message received is stamped when it arrived,
	// one sent when it was sent, and the two queues may interleave
	slices.SortStableFunc(all, func(a, b history.Entry) int { return a.TS.Compare(b.TS) })
	v := &HistoryView{Entries: []HistoryEntry{}, Skipped: skipped, Dropped: c.hist.Dropped()}
	seen := map[string]bool{} // a message redelivered after a restart arrived once
	var kept []*history.Entry
	for i := range all {
		key := all[i].Dir + all[i].MsgID
		if match(&all[i]) && !seen[key] {
			seen[key] = true
			kept = append(kept, &all[i])
		}
	}
	if len(kept) > limit {
		kept, v.More = kept[len(kept)-limit:], true
	}
	for _, e := range kept {
		v.Entries = append(v.Entries, historyEntry(e))
	}
	if keep := c.newestWithin(v.Entries); keep < len(v.Entries) {
		v.Entries, v.More = v.Entries[len(v.Entries)-keep:], true
	}
	return &Result{Status: StatusHistory, Target: req.Target, History: v}, nil
}

// historyFilter turns a request into a predicate and a limit.
func (c *Core) historyFilter(req HistoryRequest) (func(*history.Entry) bool, int, error) {
	limit := req.Max
	if limit <= 0 {
		limit = 50
	}
	if limit > 500 {
		return nil, 0, userErr("max %d is over 500", limit)
	}
	now := c.cfg.Now()
	since := now.Add(-c.cfg.History.MaxAge)
	if req.Since != "" {
		t, err := parseSince(req.Since, now)
		if err != nil {
			return nil, 0, err
		}
		if t.After(since) {
			since = t
		}
	}
	who, err := c.historyTarget(req.Target)
	if err != nil {
		return nil, 0, err
	}
	q := strings.ToLower(req.Query)
	return func(e *history.Entry) bool {
		return !e.TS.Before(since) && who(e) && (q == "" || strings.Contains(strings.ToLower(e.Body), q))
	}, limit, nil
}

// historyTarget matches the entries to or from target: by gid when it
// resolves, else by name (an entity that has gone since).
func (c *Core) historyTarget(target string) (func(*history.Entry) bool, error) {
	target = strings.TrimSpace(target)
	if target == "" {
		return func(*history.Entry) bool { return true }, nil
	}
	if e, err := c.Resolve(target); err == nil {
		return func(h *history.Entry) bool { return h.From == e.GID || h.To == e.GID }, nil
	}
	name, _, _ := strings.Cut(target, "@")
	if !ValidName(name) {
		return nil, userErr("target %s is not an entity: name one (name, name@host or gid)", Clip(target))
	}
	return func(h *history.Entry) bool { return h.FromName == name || h.ToName == name }, nil
}

// parseSince reads an RFC 3339 time, or a duration back from now.
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, userErr("since %s: give an RFC 3339 time (2026-01-02T15:04:05Z) or a duration back from now (2h)", Clip(s))
}

// PurgeHistory deletes the history of the local entity named name, or
// every history of this gateway with name "", and says how many files
// went.
func (c *Core) PurgeHistory(name string) (int, error) {
	if c.hist == nil {
		return 0, nil
	}
	if err := checkHistoryName(name); err != nil {
		return 0, err
	}
	if err := c.hist.Flush(c.ctx); err != nil { // nothing queued lands after the purge
		return 0, err
	}
	return c.hist.Purge(name)
}

// newestWithin is how many of the newest entries fit in a result's byte
// budget (at least one).
func (c *Core) newestWithin(entries []HistoryEntry) int {
	b := c.newBudget()
	n := 0
	for i := len(entries) - 1; i >= 0 && b.fits(jsonCostString(entries[i].Body)); i-- {
		n++
	}
	return n
}
