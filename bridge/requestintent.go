package bridge

import (
	"context"
	"path/filepath"
	"time"

	"github.com/herdbridge/herdbridge/bridge/store"
)

// Intents (issue 20, item 3): an idempotent call records its request id
// durably *before* its message goes out — one journal write(2), no fsync
// (store/lazyrequests.go) — so it never answers confirmed for an id a
// restart would forget. The crash windows, each honest:
//
//   - the intent cannot be written (a full disk refuses the journal and
//     the commit): the call publishes nothing and fails, saying so;
//   - intent written, publish not done (crash, transport error): a repeat
//     finds the intent and publishes the same message again — same msgId,
//     trace and turn — so it is sent once, or at worst seen twice by a
//     receiver that drops the second as already seen;
//   - published, the record saying so not written (the disk filled in
//     between): as above, the intent stands;
//   - published and recorded: a repeat is deduped.
//
// A disk full that clears later changes nothing: the records the store
// could not commit stay journaled and pending until a commit takes them.

// recordIntent makes the request id of the idempotent call ctx carries, if
// any, durable before env — its message — is published. An error means
// nothing may be published.
func (c *Core) recordIntent(ctx context.Context, env *Envelope) error {
	call, _ := ctx.Value(callKey{}).(*reqCall)
	if call == nil || call.dup {
		return nil
	}
	return c.reqs.intend(call, env, c.cfg.Now())
}

// intend writes call's intent to publish env, unless it is durable already
// (a resumed intent) or the call has published.
func (r *requests) intend(call *reqCall, env *Envelope, now time.Time) error {
	r.mu.Lock()
	e := call.e
	if e.published || e.intended == env.MsgID {
		r.mu.Unlock()
		return nil
	}
	rec := e.rec
	r.mu.Unlock()
	rec.Kind, rec.MsgID, rec.TraceID, rec.TurnID, rec.To, rec.At = string(env.Kind), env.MsgID, env.TraceID, env.TurnID, env.To, now
	rec.Publishing = true
	if err := r.st.PutRequestLazy(rec); err != nil {
		r.log.Warn("cannot record a request id: the call is refused, nothing sent", LogMsgID, env.MsgID, LogTraceID, env.TraceID, LogGID, rec.GID, "err", err)
		return userErr("nothing was sent: request_id %q could not be recorded (%v), and an id that is not recorded cannot keep a retry from sending twice. Free space where the gateway keeps its state (%s), then call again with the same request_id",
			rec.ID, err, filepath.Dir(r.st.Path()))
	}
	r.mu.Lock()
	e.intended = env.MsgID
	r.mu.Unlock()
	return nil
}

// resumedFor is the stored intent the idempotent call in ctx takes up, if
// it is one of a message of kind k: the new message takes its ids.
func resumedFor(ctx context.Context, k Kind) *store.Request {
	call, _ := ctx.Value(callKey{}).(*reqCall)
	if call == nil || call.resume == nil || Kind(call.resume.Kind) != k {
		return nil
	}
	return call.resume
}
