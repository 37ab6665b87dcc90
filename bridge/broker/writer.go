package broker

import (
	"context"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/herdbridge/herdbridge/bridge"
)

// The publish writer: one goroutine writes every publish of the broker
// transport's sends, in the order they were handed to it. amqp091-go
// serializes a channel's publishes on a lock that is held across the
// socket write; with a hundred senders each taking that lock itself, a
// sender descheduled mid-write (the machine is busy: the broker, the other
// gateway, other work) made every other one queue behind it, and each
// handoff of the lock had to wake a parked goroutine. One writer takes the
// publishes back to back as a raw publisher does, and the senders wait
// only for their own confirms (the window in Counts.Unconfirmed).

// writeReq is one publish for the writer.
type writeReq struct {
	ctx       context.Context
	pub       *amqp.Channel // the channel the sender saw up: a publish never moves to another generation
	key       string
	mandatory bool
	msg       amqp.Publishing
	done      chan writeRes // buffered: the writer never waits for a sender that gave up
}

type writeRes struct {
	dc  *amqp.DeferredConfirmation
	err error
}

// writer runs until Close.
func (t *Transport) writer() {
	defer t.wg.Done()
	for {
		select {
		case r := <-t.writes:
			dc, err := r.pub.PublishWithDeferredConfirmWithContext(r.ctx, ExchangeMsg, r.key, r.mandatory, false, r.msg)
			r.done <- writeRes{dc, err}
		case <-t.stop:
			return
		}
	}
}

// write has the writer publish msg on pub and returns its deferred
// confirm; the wait ends with ctx or Close.
func (t *Transport) write(ctx context.Context, pub *amqp.Channel, key string, mandatory bool, msg amqp.Publishing) (*amqp.DeferredConfirmation, error) {
	r := writeReq{ctx: ctx, pub: pub, key: key, mandatory: mandatory, msg: msg, done: make(chan writeRes, 1)}
	select {
	case t.writes <- r:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.stop:
		return nil, bridge.ErrClosed
	}
	select {
	case res := <-r.done:
		return res.dc, res.err
	case <-ctx.Done():
		return nil, ctx.Err() // it may still be written: outcome unknown, as for a confirm not awaited
	case <-t.stop:
		return nil, bridge.ErrClosed
	}
}
