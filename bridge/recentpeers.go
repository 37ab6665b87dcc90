package bridge

import (
	"slices"
	"strings"
)

// Recent peers: for each local entity, the few entities it last sent a
// message to or heard one from, newest first, so bridge_roster can show
// the caller who it works with without listing the whole fabric. It is
// kept in memory only (a restart starts it empty) and bounded twice: at
// most recentPeerMax peers an entity, and at most recentPeerOwners
// entities (past it, the one touched longest ago is dropped); a removed
// entity's list goes with it.

const (
	recentPeerMax    = 20
	recentPeerOwners = 4096
)

// recentPeers owns the lists. Its lock is a leaf (doc.go): it is taken
// under an entity's mu by the arrival path. Every access goes through do,
// the one function that locks it. A touch is on every send's path: it
// moves the peer to the front of its owner's list in place, and only a
// new owner past recentPeerOwners makes it look for the oldest.
type recentPeers struct {
	mu   leafMutex
	by   map[string]*peerList // by owner gid
	tick uint64               // counts touches: a list's last says how recent it is
}

// peerList is one owner's peers, newest first, and when it was touched.
type peerList struct {
	peers []string
	last  uint64
}

// do runs f on the lists with mu held.
func (r *recentPeers) do(f func(r *recentPeers)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.by == nil {
		r.by = map[string]*peerList{}
	}
	f(r)
}

// touch records that owner and peer exchanged a message just now.
func (r *recentPeers) touch(owner, peer string) {
	if owner == "" || peer == "" || owner == peer {
		return
	}
	r.do(func(r *recentPeers) {
		r.tick++
		l := r.by[owner]
		if l == nil {
			if len(r.by) >= recentPeerOwners {
				r.dropOldest()
			}
			l = &peerList{peers: make([]string, 0, 4)}
			r.by[owner] = l
		}
		l.last = r.tick
		i := slices.Index(l.peers, peer)
		switch {
		case i < 0 && len(l.peers) < recentPeerMax:
			l.peers = append(l.peers, "")
			i = len(l.peers) - 1
		case i < 0:
			i = len(l.peers) - 1 // the oldest goes
		}
		copy(l.peers[1:i+1], l.peers[:i])
		l.peers[0] = peer
	})
}

// dropOldest forgets the list touched longest ago (mu held).
func (r *recentPeers) dropOldest() {
	oldest, at := "", uint64(0)
	for o, l := range r.by {
		if oldest == "" || l.last < at {
			oldest, at = o, l.last
		}
	}
	delete(r.by, oldest)
}

// list is owner's peers, newest first (a copy).
func (r *recentPeers) list(owner string) (out []string) {
	r.do(func(r *recentPeers) {
		if l := r.by[owner]; l != nil {
			out = slices.Clone(l.peers)
		}
	})
	return out
}

// forget drops owner's list (the entity is gone).
func (r *recentPeers) forget(owner string) {
	r.do(func(r *recentPeers) { delete(r.by, owner) })
}

// peerKinds are the messages that make two entities peers: briefs,
// replies, asks and answers (not broadcasts, receipts or notices).
var peerKinds = map[Kind]bool{KindSend: true, KindAsk: true, KindReply: true, KindAnswer: true}

// notePeers records env, published by a local entity, as between its
// sender and its recipient (publish calls it); noteHeard, env reaching
// st (the arrival path calls it, st's mu held).
func (c *Core) notePeers(env *Envelope) {
	if peerKinds[env.Kind] && !strings.Contains(env.To, ".") { // not broadcast.<group>, control.<host>
		c.recent.touch(env.From, env.To)
	}
}

func (c *Core) noteHeard(st *entState, env *Envelope) {
	if peerKinds[env.Kind] {
		c.recent.touch(st.GID, env.From)
	}
}

// Circle is who an entity works with, as this gateway knows it: what
// bridge_roster's summary shows the caller besides the counts.
type Circle struct {
	// Lead is the gid of the caller's primary: the caller itself when it
	// is a primary or orchestrator, else whoever sent the brief it works
	// on ("" when it works on none).
	Lead string
	// Team are the gids that work with Lead: the local entities whose
	// brief is from Lead, and Lead's recent peers (when Lead is local).
	// The roster says which of them are workers.
	Team []string
	// Recent are the gids the caller last exchanged a message with,
	// newest first (at most 20).
	Recent []string
}

// Circle is gid's circle; the zero Circle for an unknown gid.
func (c *Core) Circle(gid string) Circle {
	st := c.reg.get(gid)
	if st == nil {
		return Circle{}
	}
	st.mu.Lock()
	role, lead := st.Role, st.brief.from
	st.mu.Unlock()
	if role == RolePrimary || role == RoleOrchestrator {
		lead = gid
	}
	ci := Circle{Lead: lead, Recent: c.recent.list(gid)}
	if lead == "" {
		return ci
	}
	for _, o := range c.reg.all() {
		o.mu.Lock()
		from := o.brief.from
		o.mu.Unlock()
		if from == lead && o.GID != lead {
			ci.Team = append(ci.Team, o.GID)
		}
	}
	if c.reg.get(lead) != nil {
		ci.Team = append(ci.Team, c.recent.list(lead)...)
	}
	return ci
}
