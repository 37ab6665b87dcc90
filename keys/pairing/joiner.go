package pairing

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/herdbridge/herdbridge/keys"
)

// Join pairs with the initiator of code: it sends this host's key and
// share, checks the initiator's confirmation (proof it holds the same
// code), confirms in turn, and pins the initiator's key once the initiator
// says it pinned this one. A wrong code pins nothing and is counted by the
// initiator. Join makes one attempt.
func Join(ctx context.Context, rv Rendezvous, code Code, opts Options) (Result, error) {
	opts.defaults()
	if err := opts.check(); err != nil {
		return Result{}, err
	}
	sid := make([]byte, sidLen)
	if _, err := rand.Read(sid); err != nil {
		return Result{}, fmt.Errorf("pairing: %w", err)
	}
	room, err := rv.Open(ctx, joinerAddr(code, sid))
	if err != nil {
		return Result{}, err
	}
	defer room.Close()
	j := &joiner{code: code, sid: sid, room: room, opts: opts}
	return j.run(ctx)
}

type joiner struct {
	code Code
	sid  []byte
	room Room
	opts Options
}

func (j *joiner) run(ctx context.Context) (Result, error) {
	mine, err := newShare(j.code, j.sid)
	if err != nil {
		return Result{}, err
	}
	hello := &Message{Type: TypeHello, SID: j.sid, Host: j.opts.Host, Key: j.opts.Key, Share: mine.enc}
	if err := j.room.Send(ctx, InitiatorAddr(j.code), hello.Marshal(), j.opts.StepWait); err != nil {
		if errors.Is(err, ErrNoPeer) {
			return Result{}, fmt.Errorf("pairing: no pairing waits for code %s on this broker (mistyped, expired or already used; or the other host uses another broker): run herdbridge pair on the other host for a new code", j.code)
		}
		return Result{}, err
	}
	reply, err := j.next(ctx, TypeReply)
	if err != nil {
		return Result{}, err
	}
	k, err := mine.secret(reply.Share)
	if err != nil {
		j.abort(ctx)
		return Result{}, err
	}
	tr := transcript(hello, reply)
	isk := sessionKey(j.sid, k, tr)
	if !equalTag(reply.Tag, confirmTag(isk, tagInitiator, tr)) {
		j.abort(ctx)
		return Result{}, fmt.Errorf("%w: the other host holds a different code (mistyped?); nothing was pinned; the attempt counts against the code there", ErrWrongCode)
	}
	if reply.Host == j.opts.Host {
		j.abort(ctx)
		return Result{}, errSameHost(reply.Host)
	}
	confirm := &Message{Type: TypeConfirm, SID: j.sid, Tag: confirmTag(isk, tagJoiner, tr)}
	if err := j.room.Send(ctx, InitiatorAddr(j.code), confirm.Marshal(), j.opts.StepWait); err != nil {
		return Result{}, fmt.Errorf("pairing: confirming to %s: %w", reply.Host, err)
	}
	done, err := j.next(ctx, TypeDone)
	if err != nil {
		return Result{}, fmt.Errorf("%w (%s may have pinned this host's key: check with herdbridge keys show there)", err, reply.Host)
	}
	if !equalTag(done.Tag, confirmTag(isk, tagDone, tr)) {
		return Result{}, fmt.Errorf("%w: the final message does not verify; nothing was pinned here", ErrReplay)
	}
	if err := keys.Trust(j.opts.TrustFile, reply.Host, reply.Key); err != nil {
		return Result{}, err
	}
	j.opts.Log.Info("paired", logPeer, reply.Host, logFP, keys.Fingerprint(reply.Key))
	return Result{Peer: reply.Host, PeerKey: reply.Key}, nil
}

// next waits up to StepWait for the initiator's message of type want for
// this session. Anything else is refused: a joiner makes one attempt.
func (j *joiner) next(ctx context.Context, want string) (*Message, error) {
	ctx, cancel := context.WithTimeout(ctx, j.opts.StepWait)
	defer cancel()
	raw, err := j.room.Next(ctx)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("pairing: no answer from the other host within %s (is herdbridge pair still running there, and on this broker? "+
				"a herdbridge there older than pairing version %d does not answer: its log says \"message version %d\"; run the same release on both hosts)",
				j.opts.StepWait, version, version)
		}
		return nil, fmt.Errorf("pairing: waiting for the other host: %w", err)
	}
	m, err := ParseMessage(raw)
	if err != nil {
		return nil, err
	}
	if m.Type != want || string(m.SID) != string(j.sid) {
		return nil, fmt.Errorf("%w: got a %s message where a %s of this session was due", ErrReplay, m.Type, want)
	}
	return m, nil
}

// abort tells the initiator this attempt failed here, so it counts it at
// once instead of waiting out StepWait.
func (j *joiner) abort(ctx context.Context) {
	abort := &Message{Type: TypeAbort, SID: j.sid}
	if err := j.room.Send(ctx, InitiatorAddr(j.code), abort.Marshal(), j.opts.StepWait); err != nil {
		j.opts.Log.Warn("telling the initiator this attempt failed did not work", logErr, err)
	}
}
