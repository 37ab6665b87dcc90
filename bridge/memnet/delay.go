package memnet

import (
	"context"
	"fmt"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

var _ bridge.DelayTransport = (*Transport)(nil)

// The delay exchange, as the broker transport declares it where the broker
// has x-delayed-message (bridge/broker/delay.go): a message published to
// it is held by the network — not by the connection that published it, so
// it outlives that gateway — and routed on bridge.msg when it comes due,
// with no mandatory routing (nobody hears where it went: a full inbox
// dead-letters it, no inbox drops it), as the RabbitMQ plugin and LavinMQ
// do. The real exchange does not run here (the plugin is not installed,
// LavinMQ is not either): this is what the core's use of it is tested on.

// DelayState implements bridge.DelayTransport.
func (t *Transport) DelayState() bridge.DelayState {
	if !t.n.opts.Delay {
		return bridge.DelayState{Reason: "no x-delayed-message on this broker"}
	}
	return bridge.DelayState{On: true}
}

// PublishDelayed implements bridge.DelayTransport: the network holds env
// and routes it on bridge.msg with key after `after`.
func (t *Transport) PublishDelayed(ctx context.Context, key string, env *bridge.Envelope, after time.Duration) error {
	if !t.n.opts.Delay {
		return bridge.ErrDelayOff
	}
	if !t.Connected() { // as the broker transport: a copy does not wait for the link
		return fmt.Errorf("%w: memnet: link down", bridge.ErrUnavailable)
	}
	m := &message{headers: env.Headers(), body: clone(env.Body), key: key, id: env.MsgID}
	return t.do(ctx, func() error {
		t.n.delayLocked(key, m, after)
		return nil
	})
}

// delayLocked arms the timer that routes m when it comes due.
func (n *Network) delayLocked(key string, m *message, after time.Duration) {
	if n.delays == nil {
		n.delays = map[*time.Timer]bool{}
	}
	var tm *time.Timer
	tm = time.AfterFunc(after, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		if !n.delays[tm] {
			return // the network closed first
		}
		delete(n.delays, tm)
		n.publishLocked(ExchangeMsg, key, m)
	})
	n.delays[tm] = true
	n.delayN++
}

// Delayed is how many delayed messages the network took, and how many of
// them are not yet due.
func (n *Network) Delayed() (taken, pending int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.delayN, len(n.delays)
}

// stopDelaysLocked drops the delayed messages not yet due (Close).
func (n *Network) stopDelaysLocked() {
	for tm := range n.delays {
		tm.Stop()
	}
	n.delays = nil
}
