package bridge

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/herdbridge/herdbridge/bridge/store"
)

// Idempotent calls (issue 10): bridge_send, bridge_broadcast and
// bridge_ask take an optional request_id. A repeat from the same entity
// with the same id within RequestMemory publishes nothing: it is answered
// with the original msgId and that message's current status, deduped.
//
// Only a call that published its message is remembered as published: a
// call that failed before (a refused target, a transport error) is
// forgotten in memory, so a retry really retries — with the same msgId if
// it got as far as recording its intent (requestintent.go). A repeat that
// arrives while the first call has not yet decided waits for that decision
// (a publish is bounded and short). The record is made durable before the
// message goes out (a call whose record cannot be written publishes nothing
// and fails), updated once it is out and kept current by the message's
// receipts (observe), so it survives a gateway restart — and a kill -9 (the
// store's journal); an OS crash can forget the last 100 ms.

// RequestMemory is how long a request_id is remembered.
const RequestMemory = 24 * time.Hour

// MaxRequestIDBytes bounds a request_id.
const MaxRequestIDBytes = 128

// checkRequestID refuses a request_id a client could not have meant.
func checkRequestID(id string) error {
	if len(id) > MaxRequestIDBytes {
		return userErr("request_id is %d bytes, over the %d-byte limit: use a shorter id, e.g. a UUID", len(id), MaxRequestIDBytes)
	}
	if !utf8.ValidString(id) {
		return userErr("request_id is not valid UTF-8: use printable characters, e.g. a UUID")
	}
	for _, r := range id {
		if unicode.IsControl(r) {
			return userErr("request_id contains a control character (%U): use printable characters, e.g. a UUID", r)
		}
	}
	return nil
}

// requestDigest fingerprints a call's arguments (length-prefixed, so no
// two argument lists share one), to refuse an id reused for another message.
func requestDigest(tool string, args ...string) string {
	h := sha256.New()
	for _, a := range append([]string{tool}, args...) {
		fmt.Fprintf(h, "%d:%s", len(a), a)
	}
	return hex.EncodeToString(h.Sum(nil))
}

type reqKey struct{ gid, id string }

// reqEntry is one remembered call. decided is closed once its first call
// published (rec is then valid) or gave up (the entry is then gone).
type reqEntry struct {
	key       reqKey
	rec       store.Request
	published bool
	intended  string // the msgId whose intent record is durable (requestintent.go)
	decided   chan struct{}
	open      int // calls of this request running now (the first, resumed repeats)
	// its places in the book's orders once published (requestbound.go)
	inAge, inEntity *list.Element
}

// reqCall is one call holding a request_id: the first (it may publish) or
// a repeat (it answers from rec).
type reqCall struct {
	key   reqKey
	e     *reqEntry
	dup   bool
	rec   store.Request // a repeat's snapshot of the record
	peers int           // a repeat: how many other calls of it run now
	// resume, for a first call, is the stored intent of an earlier call of
	// this request whose publish is not known to have completed: its
	// message is published again under the same ids (requestintent.go).
	resume *store.Request
}

// requests is the book of idempotent calls, mirrored in the store. In
// memory it keeps the calls running and the most recent published ones,
// within its bounds by count (requestbound.go); the store keeps them all
// for RequestMemory. Its lock is a leaf.
type requests struct {
	st  *store.Store
	log *slog.Logger

	mu     leafMutex
	byKey  map[reqKey]*reqEntry
	byMsg  map[string]reqKey // msgId → its call, so a receipt finds it
	pruned time.Time
	bound
}

func newRequests(st *store.Store, log *slog.Logger, max, perEntity int) *requests {
	return &requests{st: st, log: log, byKey: map[reqKey]*reqEntry{}, byMsg: map[string]reqKey{}, bound: newBound(max, perEntity)}
}

// load reads the calls remembered at start, the most recent within the
// bounds: the others stay in the store, where a repeat finds them.
func (r *requests) load(now time.Time) error {
	// the newest the book would keep; older ones stay in the store, where a
	// repeat finds them (recall)
	recs, err := r.st.LoadRequests(now.Add(-RequestMemory), r.max)
	if err != nil {
		return err
	}
	slices.SortFunc(recs, func(a, b store.Request) int { return a.At.Compare(b.At) })
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range recs {
		if !rec.Publishing { // an intent stays in the store, where a repeat finds it (recall)
			r.restoreLocked(rec)
		}
	}
	return nil
}

// restoreLocked puts a published call read from the store back in the
// book (r.mu held).
func (r *requests) restoreLocked(rec store.Request) *reqEntry {
	k := reqKey{rec.GID, rec.ID}
	e := &reqEntry{key: k, rec: rec, published: true, decided: make(chan struct{})}
	close(e.decided)
	r.byKey[k], r.byMsg[rec.MsgID] = e, k
	r.rememberLocked(e)
	return e
}

// claim takes request id of entity gid for a call of tool with the given
// argument digest: the first call, or a repeat of a published one. A
// repeat with other arguments is refused; one arriving while the first has
// not decided waits for it, and becomes the first if that gave up.
func (r *requests) claim(ctx context.Context, gid, id, tool, digest string, now time.Time) (*reqCall, error) {
	k := reqKey{gid, id}
	for {
		r.mu.Lock()
		e := r.entryLocked(k, now)
		var unsent *store.Request
		if e == nil {
			r.mu.Unlock()
			unsent = r.recall(k, now) // a call the book no longer keeps in memory
			r.mu.Lock()
			e = r.entryLocked(k, now)
		}
		if e == nil {
			e = &reqEntry{key: k, rec: store.Request{GID: gid, ID: id, Tool: tool, Digest: digest}, decided: make(chan struct{}), open: 1}
			call := &reqCall{key: k, e: e}
			// an intent with other arguments was never answered confirmed:
			// the new call replaces it
			if unsent != nil && unsent.Tool == tool && unsent.Digest == digest {
				e.intended, call.resume = unsent.MsgID, unsent
			}
			r.byKey[k] = e
			r.mu.Unlock()
			return call, nil
		}
		if e.rec.Tool != tool || e.rec.Digest != digest {
			r.mu.Unlock()
			return nil, userErr("request_id %q reused with a different message: it names an earlier %s call with other arguments; use a new request_id for a new message", id, e.rec.Tool)
		}
		if e.published {
			e.open++
			call := &reqCall{key: k, e: e, dup: true, rec: e.rec, peers: e.open - 1}
			r.mu.Unlock()
			return call, nil
		}
		r.mu.Unlock()
		select {
		case <-e.decided:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// entryLocked is the book's entry for k, nil if none or expired (r.mu
// held).
func (r *requests) entryLocked(k reqKey, now time.Time) *reqEntry {
	e := r.byKey[k]
	if e != nil && e.published && now.Sub(e.rec.At) >= RequestMemory {
		r.dropLocked(k, e)
		return nil
	}
	return e
}

// recall brings the stored record of call k back into memory, if the
// store has one younger than RequestMemory and the book has none meanwhile.
// A record of an intent (its publish not known to have completed) is
// returned instead: the call publishes it again. A store that cannot be
// read is logged: the call then publishes again (at-least-once, as without
// a request id).
func (r *requests) recall(k reqKey, now time.Time) (unsent *store.Request) {
	rec, ok, err := r.st.GetRequest(k.gid, k.id)
	if err != nil {
		r.log.Warn("cannot read a remembered request id: a repeat may publish again", LogGID, k.gid, "err", err)
		return nil
	}
	if !ok || now.Sub(rec.At) >= RequestMemory {
		return nil
	}
	if rec.Publishing {
		return &rec
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byKey[k] == nil {
		r.restoreLocked(rec)
	}
	return nil
}

// dropLocked forgets entry e of key k (r.mu held).
func (r *requests) dropLocked(k reqKey, e *reqEntry) {
	if r.byKey[k] == e {
		delete(r.byKey, k)
	}
	r.forgetLocked(e)
	if e.rec.MsgID != "" && r.byMsg[e.rec.MsgID] == k {
		delete(r.byMsg, e.rec.MsgID)
	}
}

// published records that call's message went out (the first call only).
func (r *requests) published(call *reqCall, env *Envelope, now time.Time) {
	r.mu.Lock()
	e := call.e
	if call.dup || e.published {
		r.mu.Unlock()
		return
	}
	e.rec.Kind, e.rec.MsgID, e.rec.TraceID, e.rec.TurnID, e.rec.To, e.rec.At = string(env.Kind), env.MsgID, env.TraceID, env.TurnID, env.To, now
	e.rec.Status, e.rec.Publishing = StatusConfirmed, false
	if env.Kind == KindAsk {
		e.rec.Status = StatusPending
	}
	e.published = true
	r.byMsg[env.MsgID] = call.key
	r.rememberLocked(e)
	close(e.decided)
	rec := e.rec
	r.mu.Unlock()
	r.persist(rec)
}

// end closes call with its outcome. A first call that published nothing
// is forgotten (a retry really retries); otherwise the outcome keeps the
// record current.
func (r *requests) end(call *reqCall, res *Result) {
	r.mu.Lock()
	e := call.e
	e.open--
	if !e.published {
		r.dropLocked(call.key, e)
		close(e.decided)
		r.mu.Unlock()
		return
	}
	changed := false
	if res != nil && r.byKey[call.key] == e {
		if e.rec.Target == "" && res.Target != "" {
			e.rec.Target, changed = res.Target, true
		}
		if res.Status != StatusPending {
			changed = advanceStatus(&e.rec, res.Status, res.Reason) || changed
		}
		if res.Status == StatusAsked && e.rec.TurnID == "" { // the turn a repeat must answer
			e.rec.TurnID, changed = res.TurnID, true
		}
	}
	rec := e.rec
	r.mu.Unlock()
	if changed {
		r.persist(rec)
	}
}

// observe keeps the record of the message a notice is about current (its
// INJECTED, FAILED, ABANDONED, NO_WAITER, …): called for every notice
// delivered to entity gid, after the delivery settled.
func (r *requests) observe(gid string, env *Envelope) {
	r.mu.Lock()
	k, ok := r.byMsg[env.Corr]
	e := r.byKey[k]
	if !ok || k.gid != gid || e == nil {
		r.mu.Unlock()
		return
	}
	status, reason := receiptStatus(Kind(e.rec.Kind), env)
	changed := status != "" && advanceStatus(&e.rec, status, reason)
	rec := e.rec
	r.mu.Unlock()
	if changed {
		r.persist(rec)
	}
}

// prune forgets calls older than RequestMemory: in memory at every sweep,
// in the store at most every ten minutes (it walks the bucket).
func (r *requests) prune(now time.Time) {
	before := now.Add(-RequestMemory)
	r.mu.Lock()
	for k, e := range r.byKey {
		if e.published && e.open == 0 && e.rec.At.Before(before) {
			r.dropLocked(k, e)
		}
	}
	due := now.Sub(r.pruned) >= 10*time.Minute
	if due {
		r.pruned = now
	}
	r.mu.Unlock()
	if due {
		if err := r.st.PruneRequests(before); err != nil {
			r.log.Warn("cannot prune remembered request ids", "err", err)
		}
	}
}

// persist writes rec through the store's journal: safe against a process
// crash at once, committed off the call's path (store/lazyrequests.go).
func (r *requests) persist(rec store.Request) {
	if err := r.st.PutRequestLazy(rec); err != nil {
		// the call still dedups while this gateway runs; after a restart
		// its durable intent makes a repeat publish the same msgId again,
		// which its receiver drops as already seen
		r.log.Warn("cannot update a request id's record: its intent stands", LogMsgID, rec.MsgID, LogTraceID, rec.TraceID, "err", err)
	}
}

// receiptStatus is the status a notice about a message of kind k gives it
// ("" for none).
func receiptStatus(k Kind, env *Envelope) (string, string) {
	switch env.Kind {
	case KindInjected:
		if k == KindAnswer {
			return StatusDelivered, ""
		}
		return injectedRung(string(env.Body))
	case KindFailed:
		return StatusFailed, noticeReason(env.Kind)
	case KindAbandoned:
		return StatusAbandoned, noticeReason(env.Kind)
	case KindNoWaiter:
		return StatusNoWaiter, noticeReason(env.Kind)
	case KindTooLate:
		return StatusTooLate, noticeReason(env.Kind)
	case KindAnswer:
		return StatusAnswered, ""
	}
	return "", ""
}

// statusRank orders a message's statuses: a receipt that comes late (an
// INJECTED after the reply) never moves it back. Ends rank highest.
func statusRank(s string) int {
	switch s {
	case StatusConfirmed, StatusPending, StatusQueued: // queued: the brief waits for its pane; its receipt comes later
		return 0
	case StatusInjected:
		return 1
	case StatusSubmitted, StatusUncertain:
		return 2
	}
	return 3
}

// advanceStatus moves rec to status unless it is already further; it
// reports whether rec changed.
func advanceStatus(rec *store.Request, status, reason string) bool {
	if statusRank(status) < statusRank(rec.Status) || status == rec.Status && reason == rec.Reason {
		return false
	}
	if statusRank(rec.Status) == 3 && statusRank(status) == 3 {
		return false // the first end is the end
	}
	rec.Status, rec.Reason = status, reason
	return true
}

// callKey carries the idempotent call a tool call publishes for, so the
// publish that creates its message records it (as Handover rides ctx).
type callKey struct{}

func withCall(ctx context.Context, call *reqCall) context.Context {
	return context.WithValue(ctx, callKey{}, call)
}

// publishedFor records env as the message of the idempotent call ctx
// carries, if any: called after every successful publish of a tool call.
func (c *Core) publishedFor(ctx context.Context, env *Envelope) {
	if call, _ := ctx.Value(callKey{}).(*reqCall); call != nil {
		c.reqs.published(call, env, c.cfg.Now())
	}
}

// idempotent runs a tool call under request id (none: just first). The
// first call runs first with the call in ctx; a repeat runs repeat with
// the record, and its result says deduped.
func (c *Core) idempotent(ctx context.Context, st *entState, id, tool string, args []string,
	first func(context.Context) (*Result, error), repeat func(context.Context, *reqCall) (*Result, error)) (*Result, error) {
	if id == "" {
		return first(ctx)
	}
	if err := checkRequestID(id); err != nil {
		return nil, err
	}
	call, err := c.reqs.claim(ctx, st.GID, id, tool, requestDigest(tool, args...), c.cfg.Now())
	if err != nil {
		return nil, err
	}
	var res *Result
	if call.dup {
		res, err = repeat(ctx, call)
	} else {
		res, err = first(withCall(ctx, call))
	}
	c.reqs.end(call, res)
	if res != nil && call.dup {
		res.Deduped = true
	}
	return res, err
}
