package bridge

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"
)

// Presence by host (issue 25). A gateway no longer heartbeats each of its
// entities every period: idle traffic would be O(hosts² × entities). It
// heartbeats once, as its _gateway entry, whose Digest sums up its entity
// set and profile list — a version, a hash and a count — and it sends each
// change at once as a delta: the entity's PRESENCE carrying the version it
// made (Ver) in the gateway's epoch (Epoch, its start in Unix ms: a
// restart starts a new epoch, its versions start again from 1). The first
// round of a run sends no deltas, only the heartbeat: nobody knows the new
// epoch, so every receiver asks for the snapshot anyway (or takes the
// digest, when it holds the same set).
//
// A receiver applies a delta whose Ver is the one after what it knows of
// that host in the same epoch. A gap, an unknown epoch, or a heartbeat
// whose digest does not match its view of the host (hash and count over
// the entries it holds) makes it ask: a PRESENCE_ASK to control.<host>, at
// most one per host per askEvery. The host answers with its snapshot in
// PRESENCE_SNAPSHOT pages (each ≤ maxSnapshotPage bytes, ≤
// maxSnapshotPages of them, all carrying the same epoch, version, hash and
// count) to the asker's control queue; the asker applies it once every
// page came and the entries hash to the digest the pages carry, replacing
// everything it held of that host.
//
// Liveness: a heartbeat whose digest matches refreshes every entity of its
// host; one that does not refreshes none (so a removed entity whose Gone
// was lost still expires after PresenceTTL), a delta refreshes its own.
//
// Upgrade: a delta is a PRESENCE of the old shape with two more fields,
// which an older gateway ignores: it reads the delta as a heartbeat. An
// older gateway heartbeats without a digest; while any host without one
// is in this gateway's roster, it also sends every entity's heartbeat each
// period (without Ver: a plain heartbeat) so that the old one does not
// expire them, and it treats that host's heartbeats per entity as before.
// Nobody asks a host that sent no digest, so an old gateway never sees a
// PRESENCE_ASK. Config.PresencePerEntity makes a gateway behave as an old
// one (tests, measurements).

// PresenceDigest is the _gateway heartbeat's summary of its host's
// entity set and profiles.
type PresenceDigest struct {
	Ver  uint64 `json:"ver"`
	Hash string `json:"hash"` // hex of SHA-256 truncated to 16 bytes (presenceHash)
	N    int    `json:"n"`    // the entities counted
}

// Bounds of a snapshot, as its sender builds it and its receiver takes it.
const (
	maxSnapshotPage  = 32 << 10 // bytes of one page's body
	maxSnapshotPages = 64
	maxSnapshotBytes = 8 << 20 // bytes assembled for one host at a time
	maxDigestN       = maxSnapshotPages * maxSnapshotPage / 64
)

// askEvery is the least time between two PRESENCE_ASKs to one host (and
// twice the least between two answers to one asker).
func (c *Core) askEvery() time.Duration { return min(2*time.Second, 2*c.cfg.PresenceEvery) }

// ownSync is what this gateway last published of itself: the entries its
// deltas announced, the version they reached and the digest of both. It is
// written under presence.pub only.
type ownSync struct {
	ver      uint64
	entries  map[string]Presence // by gid, canonical (cleaned, no Ver)
	profiles []string
	digest   PresenceDigest
}

// hostSync is what this gateway knows of another host's set (under
// presence.mu): its epoch and version, the gids it holds of it, the hash
// of those (cached), and a snapshot being assembled.
type hostSync struct {
	epoch    int64
	ver      uint64
	gids     map[string]bool
	hash     string // "" when it must be computed again
	hashOf   string // the profiles it was computed with
	asked    time.Time
	answer   time.Time // when this gateway last answered its ask
	answerTo int64     // the start of the asker's run then
	asm      *snapAsm
	// ahead are the deltas applied past a gap, by version (of aheadEpoch):
	// the gap's filling or a snapshot of an older version moves ver over
	// them, and a snapshot replays those it does not cover.
	ahead      map[uint64]Presence
	aheadEpoch int64
}

// maxAhead bounds the deltas kept past a gap per host.
const maxAhead = 1024

// keepAhead keeps a delta applied past a gap (mu held).
func (hs *hostSync) keepAhead(pr Presence) {
	if hs.aheadEpoch != pr.Epoch || hs.ahead == nil {
		hs.ahead, hs.aheadEpoch = map[uint64]Presence{}, pr.Epoch
	}
	if len(hs.ahead) < maxAhead {
		hs.ahead[pr.Ver] = pr
	}
}

// catchUp moves ver over the deltas kept ahead that now follow it, and
// forgets those it passed (mu held).
func (hs *hostSync) catchUp() {
	if hs.aheadEpoch != hs.epoch {
		hs.ahead = nil
		return
	}
	for {
		if _, ok := hs.ahead[hs.ver+1]; !ok {
			break
		}
		hs.ver++
	}
	for v := range hs.ahead {
		if v <= hs.ver {
			delete(hs.ahead, v)
		}
	}
}

// snapAsm is a snapshot of one host being assembled.
type snapAsm struct {
	head  SnapshotPage // the fields every page must repeat (Entries nil)
	got   map[int][]Presence
	bytes int
}

// SnapshotPage is the body of a PRESENCE_SNAPSHOT.
type SnapshotPage struct {
	Epoch    int64      `json:"epoch"`
	Ver      uint64     `json:"ver"`
	Hash     string     `json:"hash"`
	N        int        `json:"n"`
	Page     int        `json:"page"`
	Pages    int        `json:"pages"`
	Profiles []string   `json:"profiles,omitempty"`
	Entries  []Presence `json:"entries"`
}

// PresenceAskBody is the body of a PRESENCE_ASK: what the asker knows of
// the host (for the logs; the answer is the whole snapshot anyway).
type PresenceAskBody struct {
	Epoch int64  `json:"epoch"`
	Ver   uint64 `json:"ver"`
}

// canonicalEntry is the text of p that the digest hashes.
func canonicalEntry(p Presence) []byte {
	p.Ver, p.Epoch, p.Digest, p.Gone = 0, 0, nil, false
	b, _ := json.Marshal(p)
	return b
}

// presenceHash is the digest's hash of entries (sorted by gid here) and
// profiles (in their order).
func presenceHash(entries []Presence, profiles []string) string {
	sorted := slices.Clone(entries)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].GID < sorted[j].GID })
	h := sha256.New()
	for _, e := range sorted {
		h.Write([]byte("e:"))
		h.Write(canonicalEntry(e))
		h.Write([]byte("\n"))
	}
	for _, p := range profiles {
		h.Write([]byte("p:" + p + "\n"))
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// ParseDigest checks a heartbeat's digest.
func ParseDigest(d *PresenceDigest) error {
	if d == nil {
		return nil
	}
	if len(d.Hash) != 32 {
		return errors.New("digest hash is not 16 bytes of hex")
	}
	if _, err := hex.DecodeString(d.Hash); err != nil {
		return errors.New("digest hash is not hex")
	}
	if d.N < 0 || d.N > maxDigestN {
		return fmt.Errorf("digest count %d out of range", d.N)
	}
	if d.N > 0 && d.Ver == 0 {
		return errors.New("digest counts entities at version 0")
	}
	return nil
}

// DeltaFields checks an entry's delta fields: both or neither, and never on
// the _gateway entry. delta reports whether it is one.
func DeltaFields(p Presence) (delta bool, err error) {
	switch {
	case p.Epoch == 0 && p.Ver == 0:
		return false, nil
	case p.Epoch <= 0 || p.Ver == 0:
		return false, fmt.Errorf("delta with epoch %d and ver %d", p.Epoch, p.Ver)
	case p.Name == GatewayName:
		return false, errors.New("a delta for the _gateway entry")
	case p.Digest != nil:
		return false, errors.New("a digest on an entity")
	}
	return true, nil
}

// ParseSnapshotPage decodes one PRESENCE_SNAPSHOT body of host: bounded,
// consistent in itself, every entry an entity of host (cleaned).
func ParseSnapshotPage(body []byte, host string) (SnapshotPage, error) {
	var pg SnapshotPage
	if len(body) > maxSnapshotPage {
		return pg, fmt.Errorf("snapshot page of %d bytes, over %d", len(body), maxSnapshotPage)
	}
	if err := json.Unmarshal(body, &pg); err != nil {
		return pg, fmt.Errorf("snapshot page: %v", err)
	}
	if pg.Epoch <= 0 || pg.Pages < 1 || pg.Pages > maxSnapshotPages || pg.Page < 0 || pg.Page >= pg.Pages {
		return pg, fmt.Errorf("snapshot page %d of %d, epoch %d", pg.Page, pg.Pages, pg.Epoch)
	}
	if err := ParseDigest(&PresenceDigest{Ver: pg.Ver, Hash: pg.Hash, N: pg.N}); err != nil {
		return pg, err
	}
	if len(pg.Entries) > pg.N {
		return pg, fmt.Errorf("snapshot page with %d entries of %d", len(pg.Entries), pg.N)
	}
	pg.Profiles = cleanPresence(Presence{Profiles: pg.Profiles}).Profiles
	for i, e := range pg.Entries {
		if e.Host != host {
			return pg, fmt.Errorf("snapshot of %s names an entity of host %q", host, Clip(e.Host))
		}
		if e.Name == GatewayName || !isUUID(e.GID) || !ValidName(e.Name) || e.Gone || e.Digest != nil || e.Epoch != 0 || e.Ver != 0 {
			return pg, fmt.Errorf("snapshot entry %d is not an entity's", i)
		}
		pg.Entries[i] = cleanPresence(e)
	}
	return pg, nil
}

// localPresences are this host's entries as a delta would carry them.
func (c *Core) localPresences() []Presence {
	var ps []Presence
	for _, st := range c.reg.all() {
		if p, ok := c.presenceOf(st); ok {
			ps = append(ps, cleanPresence(p))
		}
	}
	return ps
}

// diffOwn compares cur with what was published last, moves the version on
// by one per change and returns the deltas (pub held). It updates the
// digest for the profiles given.
func (o *ownSync) diffOwn(cur []Presence, profiles []string, epoch int64) []Presence {
	if o.entries == nil {
		o.entries = map[string]Presence{}
	}
	var out []Presence
	seen := map[string]bool{}
	for _, p := range cur {
		seen[p.GID] = true
		if old, ok := o.entries[p.GID]; ok && string(canonicalEntry(old)) == string(canonicalEntry(p)) {
			continue
		}
		o.ver++
		o.entries[p.GID] = p
		p.Epoch, p.Ver = epoch, o.ver
		out = append(out, p)
	}
	gone := []string{}
	for gid := range o.entries {
		if !seen[gid] {
			gone = append(gone, gid)
		}
	}
	sort.Strings(gone)
	for _, gid := range gone {
		old := o.entries[gid]
		delete(o.entries, gid)
		o.ver++
		out = append(out, Presence{GID: gid, Name: old.Name, Host: old.Host, Gone: true, Epoch: epoch, Ver: o.ver})
	}
	if !slices.Equal(profiles, o.profiles) {
		if o.profiles != nil || len(profiles) > 0 {
			o.ver++
		}
		o.profiles = slices.Clone(profiles)
	}
	if len(out) > 0 || o.digest.Hash == "" || o.digest.Ver != o.ver {
		all := make([]Presence, 0, len(o.entries))
		for _, p := range o.entries {
			all = append(all, p)
		}
		o.digest = PresenceDigest{Ver: o.ver, Hash: presenceHash(all, o.profiles), N: len(all)}
	}
	return out
}

// pages splits the published set into snapshot pages (pub held); nil when
// it does not fit the bounds.
func (o *ownSync) pages(epoch int64) [][]byte {
	all := make([]Presence, 0, len(o.entries))
	for _, p := range o.entries {
		all = append(all, p)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].GID < all[j].GID })
	head := SnapshotPage{Epoch: epoch, Ver: o.ver, Hash: o.digest.Hash, N: len(all), Profiles: o.profiles}
	base, _ := json.Marshal(head)
	room := maxSnapshotPage - len(base) - 64 // page numbers grow
	var groups [][]Presence
	var cur []Presence
	size := 0
	for _, p := range all {
		n := len(canonicalEntry(p)) + 1
		if n > room {
			return nil
		}
		if size+n > room && len(cur) > 0 {
			groups = append(groups, cur)
			cur, size = nil, 0
		}
		cur = append(cur, p)
		size += n
	}
	groups = append(groups, cur) // an empty set is one empty page
	if len(groups) > maxSnapshotPages {
		return nil
	}
	out := make([][]byte, len(groups))
	for i, g := range groups {
		pg := head
		pg.Page, pg.Pages, pg.Entries = i, len(groups), g
		if pg.Entries == nil {
			pg.Entries = []Presence{}
		}
		out[i], _ = json.Marshal(pg)
	}
	return out
}

// syncOf is host's sync state, made on first use (mu held).
func (p *presence) syncOf(host string) *hostSync {
	if p.sync == nil {
		p.sync = map[string]*hostSync{}
	}
	hs := p.sync[host]
	if hs == nil {
		hs = &hostSync{gids: map[string]bool{}}
		p.sync[host] = hs
	}
	return hs
}

// putRemote holds r as a remote entity (mu held): every write of remote
// goes through it or dropRemote, which keep the per-host index.
func (p *presence) putRemote(r *remoteEntry) {
	if old := p.remote[r.p.GID]; old != nil && old.p.Host != r.p.Host {
		p.dropRemote(r.p.GID)
	}
	p.remote[r.p.GID] = r
	hs := p.syncOf(r.p.Host)
	hs.gids[r.p.GID] = true
	hs.hash = ""
}

// dropRemote forgets the remote entity gid (mu held).
func (p *presence) dropRemote(gid string) {
	r := p.remote[gid]
	if r == nil {
		return
	}
	delete(p.remote, gid)
	if hs := p.sync[r.p.Host]; hs != nil {
		delete(hs.gids, gid)
		hs.hash = ""
	}
}

// viewHash is the hash of what this gateway holds of host (mu held).
func (p *presence) viewHash(hs *hostSync, profiles []string) string {
	key := fmt.Sprint(profiles)
	if hs.hash != "" && hs.hashOf == key {
		return hs.hash
	}
	entries := make([]Presence, 0, len(hs.gids))
	for gid := range hs.gids {
		entries = append(entries, p.remote[gid].p.presence())
	}
	hs.hash, hs.hashOf = presenceHash(entries, profiles), key
	return hs.hash
}

// checkDigest compares a verified heartbeat's digest with the view of its
// host: on a match every entity of the host is refreshed (and the view
// takes the digest's epoch and version); on a mismatch none is, and ask
// says a PRESENCE_ASK is due (rate-limited).
func (p *presence) checkDigest(pr Presence, now time.Time, every time.Duration) (match, ask bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	hs := p.syncOf(pr.Host)
	d := pr.Digest
	if len(hs.gids) == d.N && p.viewHash(hs, pr.Profiles) == d.Hash {
		hs.epoch, hs.ver = pr.Started, d.Ver
		hs.catchUp()
		for gid := range hs.gids {
			p.remote[gid].seen = now
		}
		return true, false
	}
	return false, hs.mayAsk(now, every)
}

// mayAsk reports whether an ask of this host is due, and notes it (mu held).
func (hs *hostSync) mayAsk(now time.Time, every time.Duration) bool {
	if !hs.asked.IsZero() && now.Sub(hs.asked) < every {
		return false
	}
	hs.asked = now
	return true
}

// applyDelta applies a verified delta of another host: recorded when it is
// the next version, or when it is newer than anything known (a gap or a
// new epoch: then ask says a PRESENCE_ASK is due); skipped when the view
// holds its version already (stale: a snapshot covered it).
func (p *presence) applyDelta(pr Presence, now time.Time, every time.Duration) (applied, ask bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	hs := p.syncOf(pr.Host)
	switch {
	case pr.Epoch == hs.epoch && pr.Ver <= hs.ver:
		return false, false
	case pr.Epoch == hs.epoch && pr.Ver == hs.ver+1:
		hs.ver++
		defer hs.catchUp()
	case pr.Epoch < hs.epoch:
		return false, false // of a past run of that gateway
	default:
		hs.keepAhead(pr)
		ask = hs.mayAsk(now, every)
	}
	if pr.Gone {
		p.dropRemote(pr.GID)
	} else {
		p.putRemote(&remoteEntry{p: compactEntity(pr), seen: now})
		if h := p.hosts[pr.Host]; h != nil {
			h.seen = now
		}
	}
	return true, ask
}

// snapshotPage takes one verified page of host's snapshot; done holds the
// entries once the whole snapshot came and checked out, which then replaced
// the view of host. A page that is stale or a duplicate is dropped (false,
// nil); an inconsistent one is an error.
func (p *presence) snapshotPage(host string, pg SnapshotPage, size int, now time.Time) (done []Presence, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	hs := p.syncOf(host)
	if pg.Epoch < hs.epoch || pg.Epoch == hs.epoch && pg.Ver < hs.ver {
		return nil, nil // older than what is known: a late answer
	}
	head := pg
	head.Page, head.Entries = 0, nil
	if a := hs.asm; a == nil || !sameHead(a.head, head) {
		if a != nil && (pg.Epoch < a.head.Epoch || pg.Epoch == a.head.Epoch && pg.Ver < a.head.Ver) {
			return nil, nil // older than the one being assembled
		}
		hs.asm = &snapAsm{head: head, got: map[int][]Presence{}}
	}
	a := hs.asm
	if _, dup := a.got[pg.Page]; dup {
		return nil, nil
	}
	if a.bytes += size; a.bytes > maxSnapshotBytes {
		hs.asm = nil
		return nil, fmt.Errorf("snapshot of %s over %d bytes", host, maxSnapshotBytes)
	}
	a.got[pg.Page] = pg.Entries
	if len(a.got) < a.head.Pages {
		return nil, nil
	}
	hs.asm = nil
	var all []Presence
	seen := map[string]bool{}
	for i := range a.head.Pages {
		for _, e := range a.got[i] {
			if seen[e.GID] {
				return nil, fmt.Errorf("snapshot of %s lists %s twice", host, e.GID)
			}
			seen[e.GID] = true
			all = append(all, e)
		}
	}
	if len(all) != a.head.N || presenceHash(all, a.head.Profiles) != a.head.Hash {
		return nil, fmt.Errorf("snapshot of %s does not match its digest (%d entries of %d)", host, len(all), a.head.N)
	}
	for gid := range hs.gids {
		p.dropRemote(gid)
	}
	for _, e := range all {
		p.putRemote(&remoteEntry{p: compactEntity(e), seen: now})
	}
	hs.epoch, hs.ver = a.head.Epoch, a.head.Ver
	if hs.aheadEpoch == hs.epoch { // deltas newer than the snapshot, which it replaced: again, in order
		vers := make([]uint64, 0, len(hs.ahead))
		for v := range hs.ahead {
			if v > hs.ver {
				vers = append(vers, v)
			}
		}
		slices.Sort(vers)
		for _, v := range vers {
			if d := hs.ahead[v]; d.Gone {
				p.dropRemote(d.GID)
			} else {
				p.putRemote(&remoteEntry{p: compactEntity(d), seen: now})
			}
		}
	}
	hs.catchUp()
	if all == nil {
		all = []Presence{}
	}
	return all, nil
}

func sameHead(a, b SnapshotPage) bool {
	return a.Epoch == b.Epoch && a.Ver == b.Ver && a.Hash == b.Hash && a.N == b.N && a.Pages == b.Pages && slices.Equal(a.Profiles, b.Profiles)
}

// legacyPeers reports whether a host without a digest is in the roster: it
// needs every entity's heartbeat each period.
func (p *presence) legacyPeers() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, h := range p.hosts {
		if h.p.Digest == nil {
			return true
		}
	}
	return false
}

// syncState is what this gateway knows of host's set: epoch and version.
func (p *presence) syncState(host string) (epoch int64, ver uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if hs := p.sync[host]; hs != nil {
		return hs.epoch, hs.ver
	}
	return 0, 0
}

// mayAnswer reports whether an ask of host may be answered now, and notes
// it: once per half askEvery, and at once for an asker that started again
// since (its new run knows nothing).
func (p *presence) mayAnswer(host string, now time.Time, every time.Duration) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	hs := p.syncOf(host)
	var started int64
	if h := p.hosts[host]; h != nil {
		started = h.p.Started
	}
	if !hs.answer.IsZero() && now.Sub(hs.answer) < every/2 && started == hs.answerTo {
		return false
	}
	hs.answer, hs.answerTo = now, started
	return true
}

// RemoteCounts is how many other hosts (by their _gateway entries) and
// how many of their entities this gateway holds: what a convergence
// check reads without building a roster.
func (c *Core) RemoteCounts() (hosts, entities int) {
	c.pres.mu.Lock()
	defer c.pres.mu.Unlock()
	return len(c.pres.hosts), len(c.pres.remote)
}
