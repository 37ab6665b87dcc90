package mcp

import (
	"slices"
	"testing"
)

// TestAnnotationsAskOnlyBeforeDestroying: every bridge tool states all four
// hints, and the ones a client that goes by them (Codex: no approval for
// readOnlyHint, or for destructiveHint and openWorldHint both false) asks
// the person about are exactly those that destroy something a person may
// want to keep — a worker's pane (bridge_stop) or its running turn
// (bridge_interrupt). Draining one's own held messages (bridge_poll) hands
// them over (an unconfirmed result is held again), so it is not among them.
func TestAnnotationsAskOnlyBeforeDestroying(t *testing.T) {
	var asks []string
	for _, d := range New(nil, nil).tools() {
		a := d.Tool.Annotations
		if a.ReadOnlyHint == nil || a.DestructiveHint == nil || a.IdempotentHint == nil || a.OpenWorldHint == nil {
			t.Errorf("%s: every hint must be stated (a missing destructiveHint means true): %+v", d.Tool.Name, a)
			continue
		}
		if *a.ReadOnlyHint && *a.DestructiveHint {
			t.Errorf("%s: read-only and destructive", d.Tool.Name)
		}
		if !*a.ReadOnlyHint && (*a.DestructiveHint || *a.OpenWorldHint) {
			asks = append(asks, d.Tool.Name)
		}
	}
	slices.Sort(asks)
	if want := []string{"bridge_interrupt", "bridge_stop"}; !slices.Equal(asks, want) {
		t.Fatalf("tools a hint-following client asks about: %v, want %v", asks, want)
	}
}
