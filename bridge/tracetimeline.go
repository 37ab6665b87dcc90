package bridge

import (
	"slices"
	"time"
)

// TraceHop is one hop of a trace's timeline: an audit record and the host
// whose log holds it.
type TraceHop struct {
	Seen string `json:"seen"` // the host whose gateway recorded the hop
	AuditRecord
	// SinceMs is the time since the previous hop of the same message in
	// the timeline; nil for a message's first hop. Between hosts it
	// includes the difference of their clocks.
	SinceMs *float64 `json:"sinceMs,omitempty"`
	// Skewed marks a hop placed after its message's publish although its
	// own time is earlier: its host's clock is behind the publisher's.
	Skewed bool `json:"skewed,omitempty"`
}

// hopRank orders hops of one message recorded at the same instant.
var hopRank = map[Hop]int{HopPublish: 0, HopAccept: 1, HopRefuse: 1, HopHold: 2, HopQueue: 2, HopDrain: 3,
	HopInject: 3, HopExpire: 4, HopDeadLetter: 5}

// HopOf is r's hop; records written before hops were named have only a
// verdict.
func HopOf(r AuditRecord) Hop {
	switch {
	case r.Hop != "":
		return r.Hop
	case r.Dir == "out":
		return HopPublish
	case r.Verdict == "accepted":
		return HopAccept
	default:
		return HopRefuse
	}
}

// Timeline merges the hosts' hops into one list in time order. Each
// host's times are its own clock's: across hosts they are compared as
// they are, except that a message's hops on any host come after its
// publish (a host whose clock is behind would list the arrival first;
// such a hop is marked Skewed and keeps its own time).
func (r *TraceReport) Timeline() []TraceHop {
	var hops []TraceHop
	published := map[string]time.Time{}
	for _, h := range r.Hosts {
		for _, rec := range h.Hops {
			rec.Hop = HopOf(rec)
			hops = append(hops, TraceHop{Seen: h.Host, AuditRecord: rec})
			if at, ok := published[rec.MsgID]; rec.Hop == HopPublish && (!ok || rec.At.Before(at)) {
				published[rec.MsgID] = rec.At
			}
		}
	}
	key := make([]time.Time, len(hops))
	for i := range hops {
		key[i] = hops[i].At
		if at, ok := published[hops[i].MsgID]; ok && hops[i].Hop != HopPublish && hops[i].At.Before(at) {
			key[i], hops[i].Skewed = at, true
		}
	}
	idx := make([]int, len(hops))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		if c := key[a].Compare(key[b]); c != 0 {
			return c
		}
		return hopRank[hops[a].Hop] - hopRank[hops[b].Hop]
	})
	out := make([]TraceHop, len(hops))
	last := map[string]time.Time{}
	for i, j := range idx {
		out[i] = hops[j]
		if prev, ok := last[out[i].MsgID]; ok {
			ms := float64(out[i].At.Sub(prev).Microseconds()) / 1000
			out[i].SinceMs = &ms
		}
		last[out[i].MsgID] = out[i].At
	}
	return out
}
