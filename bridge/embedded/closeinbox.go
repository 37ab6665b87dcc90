package embedded

import (
	"context"

	"github.com/herdbridge/herdbridge/bridge"
)

// CloseInbox implements bridge.Transport: the inbox is routed no more (in
// memory: a restart declares it again, and the core closes it again when
// it resumes the removal), and what waits is what it stores unsettled plus
// the publishes routed to it that are still writing.
func (t *Transport) CloseInbox(ctx context.Context, gid string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return 0, bridge.ErrClosed
	}
	ib := t.inboxes[gid]
	if ib == nil {
		t.mu.Unlock()
		return 0, nil
	}
	ib.closed = true
	writing := ib.publishing
	t.mu.Unlock()
	return t.Depth(gid) + writing, nil
}

// published ends the publishes routeSnapshot counted on targets.
func (t *Transport) published(targets []routedInbox) {
	if len(targets) == 0 {
		return
	}
	t.mu.Lock()
	for _, r := range targets {
		r.ib.publishing--
	}
	t.mu.Unlock()
}
