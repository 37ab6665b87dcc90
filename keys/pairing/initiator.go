package pairing

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/herdbridge/herdbridge/keys"
)

// Offer is an initiator's code, open on the broker until Wait returns or
// Close.
type Offer struct {
	code    Code
	expires time.Time
	room    Room
	opts    Options

	seen     map[string]bool // session ids of hellos already answered: a second is a replay
	failures int
}

// maxNameplateTries bounds how often Listen draws a new code when its
// nameplate is in use by another pairing on the broker.
const maxNameplateTries = 8

// Listen draws a code and opens its room, so a joiner can meet it. Show
// Code and Expires to the user, then call Wait.
func Listen(ctx context.Context, rv Rendezvous, opts Options) (*Offer, error) {
	opts.defaults()
	if err := opts.check(); err != nil {
		return nil, err
	}
	for range maxNameplateTries {
		code, err := NewCode()
		if err != nil {
			return nil, err
		}
		room, err := rv.Open(ctx, InitiatorAddr(code))
		if errors.Is(err, ErrTaken) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return &Offer{code: code, expires: time.Now().Add(opts.Expires), room: room, opts: opts,
			seen: map[string]bool{}}, nil
	}
	return nil, errors.New("pairing: every code drawn names a meeting place in use on the broker; try again")
}

// Code is the one-time code to give the joiner.
func (o *Offer) Code() Code { return o.code }

// Expires is when the code stops working.
func (o *Offer) Expires() time.Time { return o.expires }

// Close leaves the room: the code stops working. It may be called more
// than once, and while Wait runs (Wait then returns).
func (o *Offer) Close() error { return o.room.Close() }

// Wait answers joiners until one pairs, the code expires, MaxFailures
// wrong attempts were refused, or ctx ends; then it closes the room, so
// the code works no more. On success the joiner's key is in the trust
// file. Every refused attempt is logged and counted; none pins anything.
func (o *Offer) Wait(ctx context.Context) (Result, error) {
	defer o.room.Close()
	ctx, cancel := context.WithDeadline(ctx, o.expires)
	defer cancel()
	for {
		raw, err := o.room.Next(ctx)
		if err != nil {
			return Result{Failures: o.failures}, o.waitErr(ctx, err)
		}
		res, err := o.handle(ctx, raw)
		if err == nil {
			return res, nil
		}
		if ctx.Err() != nil {
			return Result{Failures: o.failures}, o.waitErr(ctx, ctx.Err())
		}
		o.failures++
		o.opts.Log.Warn("pairing attempt refused", logFailures, o.failures, logMax, o.opts.MaxFailures, logErr, err)
		if o.failures >= o.opts.MaxFailures {
			return Result{Failures: o.failures}, fmt.Errorf("%w (%d): the code %s is dead, nothing was pinned; if that was not you, someone on the broker tried to pair: run herdbridge pair again for a new code (last: %v)",
				ErrTooManyTries, o.failures, o.code, err)
		}
	}
}

func (o *Offer) waitErr(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && !time.Now().Before(o.expires) {
		return fmt.Errorf("%w at %s with no peer paired (%d wrong attempts): run herdbridge pair again for a new code",
			ErrExpired, o.expires.UTC().Format(time.RFC3339), o.failures)
	}
	return fmt.Errorf("pairing: waiting for the peer: %w", err)
}

// handle runs one attempt, begun by a hello.
func (o *Offer) handle(ctx context.Context, raw []byte) (Result, error) {
	hello, err := ParseMessage(raw)
	if errors.Is(err, ErrVersion) {
		o.answerVersion(ctx, raw)
	}
	if err != nil {
		return Result{}, err
	}
	if hello.Type != TypeHello {
		return Result{}, fmt.Errorf("%w: a %s message while no attempt is under way", ErrReplay, hello.Type)
	}
	if o.seen[string(hello.SID)] {
		return Result{}, fmt.Errorf("%w: a hello of session %x, answered before", ErrReplay, hello.SID)
	}
	o.seen[string(hello.SID)] = true
	mine, err := newShare(o.code, hello.SID)
	if err != nil {
		return Result{}, err
	}
	k, err := mine.secret(hello.Share)
	if err != nil {
		return Result{}, err
	}
	reply := &Message{Type: TypeReply, SID: hello.SID, Host: o.opts.Host, Key: o.opts.Key, Share: mine.enc}
	tr := transcript(hello, reply)
	isk := sessionKey(hello.SID, k, tr)
	reply.Tag = confirmTag(isk, tagInitiator, tr)
	to := joinerAddr(o.code, hello.SID)
	if err := o.room.Send(ctx, to, reply.Marshal(), o.opts.StepWait); err != nil {
		return Result{}, fmt.Errorf("pairing: answering %s: %w", hello.Host, err)
	}
	if err := o.awaitConfirm(ctx, hello.SID, confirmTag(isk, tagJoiner, tr)); err != nil {
		return Result{}, fmt.Errorf("host %q: %w", hello.Host, err)
	}
	if hello.Host == o.opts.Host {
		return Result{}, errSameHost(hello.Host)
	}
	if err := keys.Trust(o.opts.TrustFile, hello.Host, hello.Key); err != nil {
		return Result{}, err
	}
	o.opts.Log.Info("paired", logPeer, hello.Host, logFP, keys.Fingerprint(hello.Key), logFailures, o.failures)
	done := &Message{Type: TypeDone, SID: hello.SID, Tag: confirmTag(isk, tagDone, tr)}
	if err := o.room.Send(ctx, to, done.Marshal(), o.opts.StepWait); err != nil {
		o.opts.Log.Warn("paired, but telling the joiner failed: it reports an error; run herdbridge keys show there to check", logPeer, hello.Host, logErr, err)
	}
	return Result{Peer: hello.Host, PeerKey: hello.Key, Failures: o.failures}, nil
}

// awaitConfirm waits for the joiner's confirmation of session sid and
// checks it against want. A hello of another session meanwhile is left
// unanswered (that joiner times out and may try again).
func (o *Offer) awaitConfirm(ctx context.Context, sid, want []byte) error {
	ctx, cancel := context.WithTimeout(ctx, o.opts.StepWait)
	defer cancel()
	for {
		raw, err := o.room.Next(ctx)
		if err != nil {
			return fmt.Errorf("no confirmation from the joiner: %w", err)
		}
		m, err := ParseMessage(raw)
		if err != nil {
			return err
		}
		if string(m.SID) != string(sid) {
			if m.Type == TypeHello && !o.seen[string(m.SID)] {
				o.opts.Log.Info("pairing hello ignored: another attempt is under way")
				continue
			}
			return fmt.Errorf("%w: a %s message of another session", ErrReplay, m.Type)
		}
		switch m.Type {
		case TypeAbort:
			return fmt.Errorf("%w: the joiner refused this attempt (its code differs, or it has this host's id)", ErrWrongCode)
		case TypeConfirm:
			if !equalTag(m.Tag, want) {
				return fmt.Errorf("%w: the joiner's confirmation does not verify", ErrWrongCode)
			}
			return nil
		default:
			return fmt.Errorf("%w: a %s message where a confirmation was due", ErrReplay, m.Type)
		}
	}
}
