package sim

import (
	"context"
	"sync"

	"github.com/herdbridge/herdbridge/bridge"
)

// panes is one gateway's fake herdr: an Injector that types instantly,
// counts what it typed per brief and pane, and fails as a round tells it
// to — an Enter swallowed (the brief typed, the turn not seen, and the
// own-draft Resubmit swallowed too), or herdr not answering (nothing
// typed, the brief stays queued).
type panes struct {
	onTyped     func(msgID, pane string)
	onSubmitted func(msgID string)

	mu      sync.Mutex
	down    bool
	swallow map[string]int // pane -> Enters still to swallow
}

var _ bridge.Injector = (*panes)(nil)

func newPanes(onTyped func(msgID, pane string), onSubmitted func(msgID string)) *panes {
	return &panes{onTyped: onTyped, onSubmitted: onSubmitted, swallow: map[string]int{}}
}

func (p *panes) setDown(down bool) {
	p.mu.Lock()
	p.down = down
	p.mu.Unlock()
}

func (p *panes) swallowNext(pane string, n int) {
	p.mu.Lock()
	p.swallow[pane] += n
	p.mu.Unlock()
}

func (p *panes) heal() {
	p.mu.Lock()
	p.down = false
	clear(p.swallow)
	p.mu.Unlock()
}

// enter reports whether an Enter on pane starts the turn (false: swallowed),
// or that herdr is down.
func (p *panes) enter(pane string) (submitted, down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		return false, true
	}
	if p.swallow[pane] > 0 {
		p.swallow[pane]--
		return false, false
	}
	return true, false
}

func (p *panes) isDown() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.down
}

func notReady() bridge.InjectReceipt {
	return bridge.InjectReceipt{Status: bridge.StatusNotReady, Waits: "herdr", Reason: "herdr is not answering (sim); the brief waits in the pane's queue"}
}

// Inject implements bridge.Injector.
func (p *panes) Inject(_ context.Context, b bridge.Brief) bridge.InjectReceipt {
	if p.isDown() {
		return notReady()
	}
	if err := b.Typing(); err != nil {
		return bridge.InjectReceipt{Status: bridge.StatusFailed, Reason: "sim: typing refused: " + err.Error()}
	}
	p.onTyped(b.Env.MsgID, b.To.PaneID)
	ok, down := p.enter(b.To.PaneID)
	switch {
	case down:
		return bridge.InjectReceipt{Status: bridge.StatusUncertain, Reason: "herdr went away after the brief was typed (sim)"}
	case !ok:
		return bridge.InjectReceipt{Status: bridge.StatusUncertain, Reason: "the Enter was swallowed (sim)"}
	}
	p.onSubmitted(b.Env.MsgID)
	return bridge.InjectReceipt{Status: bridge.StatusSubmitted}
}

// Resubmit implements bridge.Injector: one Enter, never a second paste.
func (p *panes) Resubmit(_ context.Context, b bridge.Brief) bridge.InjectReceipt {
	ok, down := p.enter(b.To.PaneID)
	switch {
	case down:
		return notReady()
	case !ok:
		return bridge.InjectReceipt{Status: bridge.StatusUncertain, Reason: "the Enter was swallowed again (sim)"}
	}
	p.onSubmitted(b.Env.MsgID)
	return bridge.InjectReceipt{Status: bridge.StatusSubmitted}
}
