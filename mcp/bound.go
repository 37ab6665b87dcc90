package mcp

import (
	"slices"
	"sort"

	"github.com/herdbridge/herdbridge/bridge"
)

// Results that grow with the fabric are bounded here, as bridge_roster's
// are in roster.go: a primary with a thousand workers that each replied
// would otherwise carry a thousand "held for you" senders in every result
// and every nudge.

// heldSenders is the most senders a held summary lists.
const heldSenders = 20

// boundHeld is h with at most heldSenders senders, those with the most
// messages (in name order, as the core lists them), and MoreFrom counting
// the rest; h itself is not changed.
func boundHeld(h bridge.HeldSummary) bridge.HeldSummary {
	if len(h.From) <= heldSenders {
		return h
	}
	from := slices.Clone(h.From)
	sort.SliceStable(from, func(i, j int) bool { return from[i].Count > from[j].Count })
	h.MoreFrom += len(from) - heldSenders
	from = from[:heldSenders]
	sort.SliceStable(from, func(i, j int) bool { return from[i].FromName < from[j].FromName })
	h.From = from
	return h
}
