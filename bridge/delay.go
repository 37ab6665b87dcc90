package bridge

import (
	"context"
	"errors"
	"time"
)

// DelayTransport is a transport that can hand a message to the broker to
// be routed later: the broker's delay exchange (bridge.delay, type
// x-delayed-message — native on LavinMQ, a plugin on RabbitMQ) holds it
// and routes it into bridge.msg after the delay. It is optional twice
// over: a transport may not implement it, and one that does says whether
// the broker it is on has the exchange (DelayState). Off, nothing uses it.
type DelayTransport interface {
	// PublishDelayed publishes env for key through the delay exchange,
	// to be routed after `after`. Nil means the broker holds it (it
	// confirmed it), not that it will be routed: a delayed message has
	// no mandatory routing, so one no inbox takes when it comes due is
	// dropped by the broker, and nobody hears. Callers use it only for a
	// copy of something they also keep trying themselves.
	PublishDelayed(ctx context.Context, key string, env *Envelope, after time.Duration) error
	// DelayState says whether bridge.delay is usable now, and why not.
	DelayState() DelayState
}

// DelayState is whether the broker's delay exchange is in use.
type DelayState struct {
	On     bool   `json:"on"`
	Reason string `json:"reason,omitempty"` // why it is off
}

// String is the line doctor and stats show.
func (s DelayState) String() string {
	if s.On {
		return "bridge.delay: on"
	}
	return "bridge.delay: off (" + s.Reason + ")"
}

// ErrDelayOff is PublishDelayed's error when the broker has no delay
// exchange (or the transport none at all).
var ErrDelayOff = errors.New("bridge.delay is off")

// DelayOf is t's delay state: off, saying so, for a transport without one.
func DelayOf(t Transport) DelayState {
	if d, ok := t.(DelayTransport); ok {
		return d.DelayState()
	}
	return DelayState{Reason: "this transport has no broker delay exchange"}
}
