package opsui

import (
	"strings"
	"sync"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// Names turns the gids of the feed and the dead letters into the names an
// operator knows: a local entity's name, a remote one's name@host, a
// gateway's "gateway@host", a group's "group G". The observer cannot ask
// the core (it runs under the core's locks), so the page's writers ask
// here, on their own goroutines; an unknown gid reloads the roster at most
// once per refreshEvery. Names of entities that left are kept (a bounded
// map), so an old feed line still reads well.
type Names struct {
	roster func() bridge.RosterView
	now    func() time.Time

	mu        sync.Mutex
	m         map[string]string
	refreshed time.Time
}

const (
	refreshEvery = time.Second
	maxNames     = 4096 // past it the map starts again from the current roster
)

// NewNames resolves with roster (Core.Roster).
func NewNames(roster func() bridge.RosterView, now func() time.Time) *Names {
	if now == nil {
		now = time.Now
	}
	return &Names{roster: roster, now: now, m: map[string]string{}}
}

// Name is gid's name, or a short form of gid when nobody here knows it.
func (n *Names) Name(gid string) string {
	if gid == "" {
		return ""
	}
	if g, ok := strings.CutPrefix(gid, "broadcast."); ok {
		return "group " + g
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if s, ok := n.m[gid]; ok {
		return s
	}
	if now := n.now(); now.Sub(n.refreshed) >= refreshEvery {
		n.refreshed = now
		n.load(n.roster())
		if s, ok := n.m[gid]; ok {
			return s
		}
	}
	return short(gid)
}

// Learn records the names of a roster the caller already has.
func (n *Names) Learn(v bridge.RosterView) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.load(v)
}

func (n *Names) load(v bridge.RosterView) {
	if len(n.m) > maxNames {
		n.m = map[string]string{}
	}
	local := ""
	for _, h := range v.Hosts {
		n.m[bridge.GatewayGID(h.Host)] = "gateway@" + h.Host
		if h.Local {
			local = h.Host
		}
	}
	for _, e := range v.Entities {
		if e.Host == local {
			n.m[e.GID] = e.Name
		} else {
			n.m[e.GID] = e.Name + "@" + e.Host
		}
	}
}

// short is the first 8 characters of an unknown gid.
func short(gid string) string {
	if len(gid) > 8 {
		return gid[:8] + "…"
	}
	return gid
}
