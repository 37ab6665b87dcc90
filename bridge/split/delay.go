package split

import (
	"context"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

var _ bridge.DelayTransport = (*Transport)(nil)

// DelayState implements bridge.DelayTransport: the broker's.
func (t *Transport) DelayState() bridge.DelayState { return bridge.DelayOf(t.remote) }

// PublishDelayed implements bridge.DelayTransport: straight to the
// broker, never the outbox — a delayed copy is a copy beside a retry the
// caller keeps, so one the broker cannot take now is simply not made. A
// key of this host is fine: its inbox is declared on the broker too, and
// its consumer reads that side.
func (t *Transport) PublishDelayed(ctx context.Context, key string, env *bridge.Envelope, after time.Duration) error {
	if t.isClosed() {
		return bridge.ErrClosed
	}
	d, ok := t.remote.(bridge.DelayTransport)
	if !ok || !d.DelayState().On {
		return bridge.ErrDelayOff
	}
	if !t.remote.Connected() {
		return bridge.ErrUnavailable
	}
	return d.PublishDelayed(ctx, key, env, after)
}
