package bridge

import (
	"encoding/json"
	"runtime/debug"
	"slices"
	"time"

	"github.com/herdbridge/herdbridge/bridge/store"
)

// Spilling: a message held for an entity that no call is waiting for is
// moved from its transport inbox into the store, and acked in the inbox
// only once the store has it. The held set then lives on disk: a filtered
// drain sees every message whatever the backlog in front of it (the
// transport's prefetch window only bounds what is in flight), and memory
// holds a head per message, not its body. Messages a waiting call takes at
// once are never written, and neither are those drained within SpillDelay
// of their arrival: the reply path pays no extra write (a held message is
// durable in its transport until it is written or drained, so waiting
// costs no safety). A backlog is written at once: past spillEagerCount
// messages or spillEagerBytes queued, nothing waits.
//
// An entity's messages are written strictly in arrival order, so the store
// always holds the oldest of them and the transport the newest: a restart
// (which restores the store's, then takes the transport's again) keeps
// arrival order. A message a call has claimed holds back the ones after it
// until the call settles it (it is never written) or lets it go.

// spillMaxBatch bounds one store transaction, in messages and body bytes.
const (
	spillMaxBatch      = 256
	spillMaxBatchBytes = 16 << 20
)

// A queue this long (or this many body bytes) is a backlog: written now.
// A backlog also shows as a queue of half the prefetch window: the
// transport delivers no more until these are written and acked, so
// waiting would only slow it down (spiller.eagerAt).
const (
	spillEagerCount = 64
	spillEagerBytes = 1 << 20
)

type spillItem struct {
	st   *entState
	hm   *heldMsg
	size int       // body bytes, read when queued (under the entity's lock)
	at   time.Time // when it was queued
}

// spiller queues held messages for the spill loop.
type spiller struct {
	mu      leafMutex
	pending []spillItem
	bytes   int // body bytes in pending
	// drained while queued: still in pending (the loop skips them), not
	// a backlog; without this a steady send+poll loop counted every
	// drained message and wrote the one in flight each eagerAt round trips
	droppedN, droppedBytes int
	eagerAt                int // queue length that is a backlog: min(spillEagerCount, prefetch/2)
	kick                   chan struct{}
}

func newSpiller(prefetch int) *spiller {
	return &spiller{kick: make(chan struct{}, 1), eagerAt: max(1, min(spillEagerCount, prefetch/2))}
}

func (s *spiller) push(it spillItem) {
	it.at = time.Now()
	it.hm.spillState.Store(spillQueued)
	s.mu.Lock()
	s.pending = append(s.pending, it)
	s.bytes += it.size
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// spillNext queues st's next messages for the store, in arrival order, up
// to InboxMaxLength written (st.mu held). Past that cap a message stays in
// its transport, where the inbox's own cap and TTL act on what comes after.
func (c *Core) spillNext(st *entState) {
	for {
		hm := st.nextUnwritten()
		if hm == nil || hm.claimed || hm.env == nil || st.removed || st.stored >= c.cfg.InboxMaxLength {
			return
		}
		st.startSpill(hm)
		c.spills.push(spillItem{st: st, hm: hm, size: len(hm.env.Body)})
	}
}

// spillLoop writes queued messages to the store in batches until the
// core stops; what is left then stays unacked in its transport, to be
// delivered again.
func (c *Core) spillLoop() {
	defer c.wg.Done()
	var burst int // bytes spilled since the last release
	var released time.Time
	var later <-chan time.Time // the release at the end of a burst
	var retry <-chan time.Time // after a failed write
	var due <-chan time.Time   // when the oldest queued message has waited SpillDelay
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-due:
			due = nil
		case <-c.spills.kick:
		case <-later:
			later = nil
			c.releaseMemory()
			burst, released = 0, time.Now()
			continue
		case <-retry:
			retry = nil
			c.spillAll()
		}
		for c.ctx.Err() == nil && retry == nil {
			batch, wait := c.spills.take(time.Now(), c.cfg.SpillDelay)
			if len(batch) == 0 {
				if wait > 0 && due == nil {
					due = time.After(wait)
				}
				break
			}
			n, err := c.spillBatch(batch)
			burst += n
			if err != nil {
				// they stay unacked in their transport: nothing is lost;
				// put back in order and tried again in a while
				c.log.Warn("held messages not moved to the store: trying again in 1 s", "n", len(batch), "err", err)
				c.unqueue(append(batch, c.spills.takeAll()...)) // all of it: what stays queued would overtake the failed
				retry = time.After(time.Second)
			}
		}
		switch {
		case burst >= releaseAfterBytes && time.Since(released) >= releaseEvery:
			c.releaseMemory() // a long burst gives back as it goes
			burst, released = 0, time.Now()
		case burst >= releaseTailBytes && later == nil:
			later = time.After(releaseEvery) // and once more after it
		}
	}
}

// During and after a burst of spills (a backlog arriving), give the burst's
// memory back. Its garbage (decoded deliveries, encoded records)
// would otherwise keep the heap at twice what stays live until the
// runtime's scavenger slowly returns it, and the state file's pages the
// writes faulted in would stay mapped.
const (
	releaseAfterBytes = 16 << 20 // a burst this big releases every releaseEvery
	releaseTailBytes  = 1 << 20  // one this big releases once more releaseEvery after
	releaseEvery      = 5 * time.Second
)

func (c *Core) releaseMemory() {
	if err := c.st.ReleaseMapped(); err != nil {
		c.log.Debug("state file pages not released", "err", err)
	}
	debug.FreeOSMemory()
}

// spillAll runs spillNext for every entity (after a failed write).
func (c *Core) spillAll() {
	for _, st := range c.reg.all() {
		st.mu.Lock()
		c.spillNext(st)
		st.mu.Unlock()
	}
}

// unqueue puts queued items back at the front of their entities'
// unwritten lists, in queue order, so a retry writes them first.
func (c *Core) unqueue(items []spillItem) {
	byEnt := map[*entState][]*heldMsg{}
	var order []*entState
	for _, it := range items {
		if _, ok := byEnt[it.st]; !ok {
			order = append(order, it.st)
		}
		byEnt[it.st] = append(byEnt[it.st], it.hm)
	}
	for _, st := range order {
		st.mu.Lock()
		st.unspill(byEnt[st])
		st.mu.Unlock()
	}
}

// take removes the next batch from the queue: the messages queued at
// least delay before now, or any when the queue is a backlog. With none
// due, wait is how long until the oldest is (0: the queue is empty).
func (s *spiller) take(now time.Time, delay time.Duration) (batch []spillItem, wait time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	eager := len(s.pending)-s.droppedN >= s.eagerAt || s.bytes-s.droppedBytes >= spillEagerBytes
	n, bytes := 0, 0
	for n < len(s.pending) && n < spillMaxBatch && bytes < spillMaxBatchBytes {
		if !eager && now.Sub(s.pending[n].at) < delay {
			break
		}
		bytes += s.pending[n].size
		n++
	}
	if n == 0 && len(s.pending) > 0 {
		wait = max(s.pending[0].at.Add(delay).Sub(now), time.Millisecond)
	}
	// advance instead of shifting the rest down: a backlog of 100k queued
	// would otherwise be copied once per batch. The batch is a copy and
	// its slots are cleared: the backing array outlives the batch (until
	// an append outgrows it), and its old slots kept every message they
	// pointed at — drained, settled, bodies and all — ~750 B a message of
	// the last second's traffic at idle, a whole burst's bodies after one.
	batch = slices.Clone(s.pending[:n])
	clear(s.pending[:n])
	s.pending = s.pending[n:]
	if len(s.pending) == 0 {
		s.pending = nil
	}
	s.bytes -= bytes
	s.takenLocked(batch)
	return batch, wait
}

// The states of heldMsg.spillState.
const (
	spillQueued int32 = iota
	spillTaken
	spillDropped
)

// dropped counts queued messages a drain settled (from dropHeld).
func (s *spiller) dropped(n, bytes int) {
	if n == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.droppedN += n
	s.droppedBytes += bytes
}

// takenLocked marks batch taken by the loop (s.mu held); those a drain
// dropped first leave the dropped count with it.
func (s *spiller) takenLocked(batch []spillItem) {
	for _, it := range batch {
		if !it.hm.spillState.CompareAndSwap(spillQueued, spillTaken) {
			s.droppedN--
			s.droppedBytes -= it.size
		}
	}
}

// takeAll empties the queue.
func (s *spiller) takeAll() []spillItem {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := s.pending
	s.pending, s.bytes = nil, 0
	s.takenLocked(all)
	return all
}

// spillBatch stores batch in one transaction, then acks each message in
// its transport and drops its body from memory. It returns the bytes
// written; on an error nothing was.
func (c *Core) spillBatch(batch []spillItem) (int, error) {
	live, puts := c.encodeSpills(batch)
	if len(live) == 0 {
		return 0, nil
	}
	written := 0
	for _, p := range puts {
		written += len(p.Env)
	}
	seqs, err := c.st.PutHeld(puts)
	if err != nil {
		return 0, err
	}
	var ackers []Acker
	orphans := map[*entState][]uint64{}
	for i, it := range live {
		it.st.mu.Lock()
		hm := it.hm
		hm.spilling, hm.seq = false, seqs[i]
		switch {
		case hm.settled || it.st.removed: // drained, expired or removed while it was written
			orphans[it.st] = append(orphans[it.st], hm.seq)
		default:
			ackers = append(ackers, hm.acks.all()...)
			hm.acks = nil
			if !hm.claimed {
				hm.env = nil
				hm.head.from = it.st.internFrom(hm.head.from)
			}
		}
		it.st.mu.Unlock()
	}
	// an ack lost here (the consumer bounced) brings the message back
	// redelivered: alreadyHere acks that copy
	_ = ackAll(ackers)
	for st, seqs := range orphans {
		if err := c.st.DeleteHeld(st.GID, seqs); err != nil {
			c.log.Warn("drained messages not deleted from the store", LogGID, st.GID, "err", err)
		}
	}
	return written, nil
}

// encodeSpills encodes the messages of batch that still need the store.
func (c *Core) encodeSpills(batch []spillItem) ([]spillItem, []store.HeldPut) {
	var live []spillItem
	var puts []store.HeldPut
	for _, it := range batch {
		it.st.mu.Lock()
		env, skip := it.hm.env, it.hm.settled || it.hm.seq != 0 || it.st.removed
		if skip {
			it.hm.spilling = false
		}
		it.st.mu.Unlock()
		if skip || env == nil {
			continue
		}
		raw, err := json.Marshal(env)
		if err != nil { // cannot happen for a decoded envelope; it stays in its transport
			c.log.Warn("held message not encodable", LogMsgID, env.MsgID, LogTraceID, env.TraceID, "err", err)
			continue
		}
		live = append(live, it)
		puts = append(puts, store.HeldPut{GID: it.st.GID, Env: raw})
	}
	return live, puts
}

// loadHeld restores every entity's held set from the store, before the
// inboxes attach: a redelivered copy of a spilled message must find it.
// Records of entities that are gone, or unreadable ones, are deleted.
func (c *Core) loadHeld() (int, error) {
	orphans := map[string][]uint64{}
	n := 0
	err := c.st.EachHeld(func(gid string, seq uint64, raw []byte) error {
		st := c.reg.get(gid)
		var env Envelope
		if st == nil || json.Unmarshal(raw, &env) != nil || env.MsgID == "" || c.mem.has(gid+env.MsgID) {
			// gone, unreadable, or drained before (its delete failed)
			orphans[gid] = append(orphans[gid], seq)
			return nil
		}
		hm := newHeld(&env, nil)
		hm.env, hm.seq = nil, seq
		st.mu.Lock()
		hm.head.from = st.internFrom(hm.head.from)
		if st.findHeld(env.MsgID) == nil {
			st.addHeld(hm)
			c.nudges.want(gid) // it waits unread: its entity hears so once it is back
			n++
		} else {
			orphans[gid] = append(orphans[gid], seq)
		}
		st.mu.Unlock()
		return nil
	})
	if err != nil {
		return 0, err
	}
	for gid, seqs := range orphans {
		c.log.Warn("held records dropped: entity gone, unreadable or duplicate", LogGID, gid, "n", len(seqs))
		if err := c.st.DeleteHeld(gid, seqs); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// bodies loads the envelopes of claimed messages that are only in the
// store. A message whose record is gone or unreadable is settled and left
// out, with a warning; when the store cannot be read at all they are
// unclaimed, to be drained later.
func (c *Core) bodies(st *entState, hms []*heldMsg) []*heldMsg {
	var need []*heldMsg
	var seqs []uint64
	st.mu.Lock()
	for _, hm := range hms {
		if hm.env == nil || hm.seq != 0 && hm.env.Body == nil { // only in the store, or its body dropped (dropBodies)
			need, seqs = append(need, hm), append(seqs, hm.seq)
		}
	}
	st.mu.Unlock()
	if len(need) == 0 {
		return hms
	}
	envs, err := c.readHeld(st.GID, seqs)
	bad := map[*heldMsg]bool{}
	var lost []*heldMsg
	st.mu.Lock()
	for i, hm := range need {
		if envs[i] == nil {
			bad[hm] = true
			if err == nil {
				lost = append(lost, hm)
			}
			continue
		}
		hm.env = envs[i]
	}
	st.mu.Unlock()
	if len(bad) == 0 {
		return hms
	}
	out := make([]*heldMsg, 0, len(hms)-len(bad))
	for _, hm := range hms {
		if !bad[hm] {
			out = append(out, hm)
		}
	}
	if err != nil {
		c.log.Warn("held messages not readable from the store now", LogGID, st.GID, "n", len(bad), "err", err)
		var back []*heldMsg
		for hm := range bad {
			back = append(back, hm)
		}
		c.unclaim(st, back)
		return out
	}
	c.log.Warn("held messages missing or unreadable in the store: dropped", LogGID, st.GID, "n", len(lost))
	_ = c.settleTaken(st, lost)
	return out
}

// withBodies calls f with each of hms whose kind keep accepts, its
// envelope loaded from the store, 64 at a time, and drops each body again
// after f: a burst of thousands (expiring, or reaped, at once) never has
// them all in memory. What bodies could not load is settled by it.
func (c *Core) withBodies(st *entState, hms []*heldMsg, keep func(Kind) bool, f func(*heldMsg)) {
	need := slices.DeleteFunc(slices.Clone(hms), func(hm *heldMsg) bool { return !keep(hm.head.kind) })
	for chunk := range slices.Chunk(need, 64) {
		for _, hm := range c.bodies(st, chunk) {
			f(hm)
			st.mu.Lock()
			if hm.seq != 0 {
				hm.env = nil
			}
			st.mu.Unlock()
		}
	}
}

// readHeld reads and decodes gid's records seqs; a missing or unreadable
// one is nil.
func (c *Core) readHeld(gid string, seqs []uint64) ([]*Envelope, error) {
	envs := make([]*Envelope, len(seqs))
	raws, err := c.st.GetHeld(gid, seqs)
	if err != nil {
		return envs, err
	}
	for i, raw := range raws {
		var env Envelope
		if raw != nil && json.Unmarshal(raw, &env) == nil && env.MsgID != "" {
			envs[i] = &env
		}
	}
	return envs, nil
}
