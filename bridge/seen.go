package bridge

import (
	"log/slog"
	"time"

	"github.com/herdbridge/herdbridge/bridge/store"
)

// memory is what verification remembers, across restarts too, so that it
// does not start from nothing: the (gid, msgId) keys it took (until they
// expire, a replay after a restart is still a replay) and which host each
// sender lives on (a gid's host never changes; a sender's backlog still
// verifies after it left, or while its gateway is down). It has its own
// lock, a leaf: nothing else is locked while it is held.
type memory struct {
	ttl  time.Duration // how long a silent sender's binding lasts (MessageTTL)
	skew time.Duration // added to a message's expiry for its seen key

	mu           leafMutex
	seen         *seenSet
	bindings     map[string]*binding // sender gid -> its host, from signed presence
	dirtySeen    []store.Seen
	dirtySenders []store.Sender
	pruned       time.Time
}

// binding is a sender's host as this gateway knows it.
type binding struct {
	host      string
	role      Role // in its last signed presence that named one
	seen      time.Time
	persisted time.Time
}

func newMemory(size int, ttl, skew time.Duration) *memory {
	return &memory{ttl: ttl, skew: skew, seen: newSeenSet(size), bindings: map[string]*binding{}}
}

// has reports whether key was taken.
func (m *memory) has(key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seen.has(key)
}

// markEnv records key (gid+msgId) as taken until env's expiry (past it, a
// copy is refused as expired anyway).
func (m *memory) markEnv(key string, env *Envelope) {
	m.mark(key, env.ExpiresAt.Add(m.skew))
}

// mark records key as taken until exp; it reports whether key was new.
func (m *memory) mark(key string, exp time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen.has(key) {
		return false
	}
	m.seen.add(key)
	m.dirtySeen = append(m.dirtySeen, store.Seen{Digest: store.DigestSeen(key), Exp: exp})
	return true
}

// take records key as taken in memory only (not persisted yet); it
// reports whether key was new. A fate being reported is taken first, so a
// second reporter of the same message skips it, and kept (persisted) only
// once its report is out, or forgotten when it could not be sent: a
// restart must not find a message reported that its sender never heard of.
func (m *memory) take(key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen.has(key) {
		return false
	}
	m.seen.add(key)
	return true
}

// keep persists key, taken by take, until exp.
func (m *memory) keep(key string, exp time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dirtySeen = append(m.dirtySeen, store.Seen{Digest: store.DigestSeen(key), Exp: exp})
}

// forget undoes take (never persisted, so the store has nothing to undo).
func (m *memory) forget(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen.forget(key)
}

// hostOf is the host gid is bound to, "" when none (lapsed or not).
func (m *memory) hostOf(gid string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b := m.bindings[gid]; b != nil {
		return b.host
	}
	return ""
}

// liveHostOf is the host gid is bound to while the binding has not lapsed.
func (m *memory) liveHostOf(gid string, now time.Time) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b := m.bindings[gid]; b != nil && now.Sub(b.seen) < m.ttl {
		return b.host
	}
	return ""
}

// bind records that gid lives on host with role (a verified heartbeat
// whose owner was checked; role "" — a Gone — keeps the one known). A new
// role is persisted at once.
func (m *memory) bind(gid, host string, role Role, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.bindings[gid]
	if b == nil || b.host != host {
		b = &binding{host: intern(host)} // interned: a host's senders share it
		m.bindings[intern(gid)] = b
	}
	b.seen = now
	if role != "" && role != b.role {
		b.role, b.persisted = Role(intern(string(role))), time.Time{}
	}
	if now.Sub(b.persisted) > time.Hour {
		b.persisted = now
		m.dirtySenders = append(m.dirtySenders, store.Sender{GID: gid, Host: host, Seen: now, Role: string(b.role)})
	}
}

// roleOf is the role gid's binding to host recorded ("" if none).
func (m *memory) roleOf(gid, host string) Role {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b := m.bindings[gid]; b != nil && b.host == host {
		return b.role
	}
	return ""
}

// load restores the seen-set and the sender bindings at start.
func (m *memory) load(st *store.Store, now time.Time) error {
	seen, senders, err := st.LoadMemory(now, now.Add(-m.ttl), m.seen.max)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range seen {
		m.seen.addDigest(r.Digest)
	}
	for _, r := range senders {
		m.bindings[r.GID] = &binding{host: r.Host, role: Role(r.Role), seen: r.Seen, persisted: r.Seen}
	}
	return nil
}

// save writes the new seen keys and bindings (one commit); every minute it
// also prunes. Called by the sweeper and at Close.
func (m *memory) save(st *store.Store, now time.Time, log *slog.Logger) {
	m.mu.Lock()
	seen, senders := m.dirtySeen, m.dirtySenders
	m.dirtySeen, m.dirtySenders = nil, nil
	prune := now.Sub(m.pruned) > time.Minute
	if prune {
		m.pruned = now
		for gid, b := range m.bindings {
			if now.Sub(b.seen) > m.ttl {
				delete(m.bindings, gid)
			}
		}
	}
	m.mu.Unlock()
	if len(seen) == 0 && len(senders) == 0 && !prune {
		return
	}
	if err := st.SaveMemory(seen, senders, prune, now, now.Add(-m.ttl)); err != nil {
		log.Error("saving the seen-set and sender bindings failed: a replay after a restart may pass", "err", err)
	}
}

// seenSet is a bounded set of (gid, msgId) pairs already handled, FIFO
// eviction. Keyed per entity: one broadcast is one msgId in many inboxes.
//
// It keeps a fixed-size digest of each key, not the key: the map and the
// ring are allocated once at their bound, so a busy gateway's heap does
// not grow with every message until the bound is reached (a gid+msgId
// string cost ~96 B a message on top of its map and ring slots). The
// digest is 128 bits of SHA-256: a false "seen" (a message dropped as a
// replay) would need a collision no sender can aim for. The store keeps
// the same digests, ordered by expiry (store/timeindex.go).
type seenSet struct {
	max  int
	m    map[seenKey]struct{}
	ring []seenKey
	used int // ring[:used] holds keys (the ring fills before it wraps)
	next int
}

// seenKey is the digest of a gid+msgId key.
type seenKey = store.SeenDigest

func newSeenSet(max int) *seenSet {
	return &seenSet{max: max, m: make(map[seenKey]struct{}, max), ring: make([]seenKey, max)}
}

func (s *seenSet) has(id string) bool { _, ok := s.m[store.DigestSeen(id)]; return ok }

func (s *seenSet) add(id string) { s.addDigest(store.DigestSeen(id)) }

// forget drops id. Its ring slot stays: if id is added again, that older
// slot evicts it as early as its first add would have been — never later
// than the bound, so the set stays bounded.
func (s *seenSet) forget(id string) { delete(s.m, store.DigestSeen(id)) }

func (s *seenSet) addDigest(k seenKey) {
	if _, ok := s.m[k]; ok {
		return
	}
	if s.used == s.max {
		delete(s.m, s.ring[s.next])
	} else {
		s.used++
	}
	s.ring[s.next] = k
	s.m[k] = struct{}{}
	s.next = (s.next + 1) % s.max
}
