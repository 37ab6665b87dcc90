package bridge

import (
	"encoding/json"
	"runtime/debug"
	"sync"
	"time"

	"github.com/herdbridge/herdbridge/bridge/store"
)

// Spilling: a message held for an entity that no call is waiting for is
// moved from its transport inbox into the store, and acked in the inbox
// only once the store has it. The held set then lives on disk: a filtered
// drain sees every message whatever the backlog in front of it (the
// transport's prefetch window only bounds what is in flight), and memory
// holds a head per message, not its body. Messages a waiting call takes at
// once are never spilled: the reply path pays no extra write.

// spillMaxBatch bounds one store transaction, in messages and body bytes.
const (
	spillMaxBatch      = 256
	spillMaxBatchBytes = 16 << 20
)

type spillItem struct {
	st *entState
	hm *heldMsg
}

// spiller queues held messages for the spill loop.
type spiller struct {
	mu      sync.Mutex
	pending []spillItem
	kick    chan struct{}
}

func newSpiller() *spiller { return &spiller{kick: make(chan struct{}, 1)} }

// spill queues hm for the store (st.mu held). A message stays in its
// transport instead while the entity holds InboxMaxLength on disk: the
// transport's own cap and TTL then act on what comes after.
func (c *Core) spill(st *entState, hm *heldMsg) {
	if hm.seq != 0 || hm.spilling || hm.settled || hm.acks == nil || len(st.held) > c.cfg.InboxMaxLength {
		return
	}
	hm.spilling = true
	c.spills.mu.Lock()
	c.spills.pending = append(c.spills.pending, spillItem{st, hm})
	c.spills.mu.Unlock()
	select {
	case c.spills.kick <- struct{}{}:
	default:
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
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.spills.kick:
		case <-later:
			later = nil
			c.releaseMemory()
			burst, released = 0, time.Now()
			continue
		}
		for c.ctx.Err() == nil {
			batch := c.spills.take()
			if len(batch) == 0 {
				break
			}
			burst += c.spillBatch(batch)
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

// take removes the next batch from the queue.
func (s *spiller) take() []spillItem {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, bytes := 0, 0
	for n < len(s.pending) && n < spillMaxBatch && bytes < spillMaxBatchBytes {
		if env := s.pending[n].hm.env; env != nil {
			bytes += len(env.Body)
		}
		n++
	}
	batch := append([]spillItem(nil), s.pending[:n]...)
	s.pending = append(s.pending[:0], s.pending[n:]...)
	return batch
}

// spillBatch stores batch in one transaction, then acks each message in
// its transport and drops its body from memory. It returns the bytes
// written.
func (c *Core) spillBatch(batch []spillItem) int {
	live, puts := c.encodeSpills(batch)
	if len(live) == 0 {
		return 0
	}
	written := 0
	for _, p := range puts {
		written += len(p.Env)
	}
	seqs, err := c.st.PutHeld(puts)
	if err != nil {
		// they stay in memory, unacked in their transport: nothing is lost
		c.log.Warn("held messages not moved to the store", "n", len(live), "err", err)
		for _, it := range live {
			it.st.mu.Lock()
			it.hm.spilling = false
			it.st.mu.Unlock()
		}
		return 0
	}
	var ackers []Acker
	orphans := map[*entState][]uint64{}
	for i, it := range live {
		it.st.mu.Lock()
		hm := it.hm
		hm.spilling, hm.seq = false, seqs[i]
		switch {
		case hm.settled: // drained or expired while it was written
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
	return written
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
		if err != nil { // cannot happen for a decoded envelope; stays in memory
			c.log.Warn("held message not encodable", LogMsgID, env.MsgID, "err", err)
			continue
		}
		live = append(live, it)
		puts = append(puts, store.HeldPut{GID: it.st.GID, Env: raw})
	}
	return live, puts
}

// internFrom returns the entity's one copy of sender gid from (mu held):
// a backlog from one chatty sender keeps one string, not one per message.
func (st *entState) internFrom(from string) string {
	if s, ok := st.froms[from]; ok {
		return s
	}
	if st.froms == nil {
		st.froms = map[string]string{}
	}
	st.froms[from] = from
	return from
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
		if st == nil || json.Unmarshal(raw, &env) != nil || env.MsgID == "" {
			orphans[gid] = append(orphans[gid], seq)
			return nil
		}
		hm := newHeld(&env, nil)
		hm.env, hm.seq = nil, seq
		st.mu.Lock()
		hm.head.from = st.internFrom(hm.head.from)
		if st.findHeld(env.MsgID) == nil {
			st.addHeld(hm)
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
		if hm.env == nil {
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
