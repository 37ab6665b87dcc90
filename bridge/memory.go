package bridge

import (
	"encoding/binary"
	"encoding/json"
	"time"

	bolt "go.etcd.io/bbolt"
)

// What a gateway remembers across restarts so that verification does not
// start from nothing: the msgIds it took (until they expire, a replay after
// a restart is still a replay) and which host each sender lives on (a
// gid's host never changes; a sender's backlog still verifies after it
// left, or while its gateway is down).
var (
	bktSeen    = []byte("seen")    // seen key -> expiry, Unix ms (8 bytes)
	bktSenders = []byte("senders") // gid -> senderRec
)

type seenRec struct {
	Key string
	Exp time.Time
}

// senderRec binds a gid to the host whose signed presence named it first.
type senderRec struct {
	GID  string    `json:"gid"`
	Host string    `json:"host"`
	Seen time.Time `json:"seen"` // last heartbeat (persisted at most hourly)
}

// saveMemory writes what changed since the last call in one transaction;
// with prune, entries past their expiry (seen) or silent since staleBefore
// (senders) are dropped too.
func (s *Store) saveMemory(seen []seenRec, senders []senderRec, prune bool, now, staleBefore time.Time) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		sb, err := tx.CreateBucketIfNotExists(bktSeen)
		if err != nil {
			return err
		}
		nb, err := tx.CreateBucketIfNotExists(bktSenders)
		if err != nil {
			return err
		}
		for _, r := range seen {
			if err := sb.Put([]byte(r.Key), binary.BigEndian.AppendUint64(nil, uint64(r.Exp.UnixMilli()))); err != nil {
				return err
			}
		}
		for _, r := range senders {
			raw, _ := json.Marshal(r)
			if err := nb.Put([]byte(r.GID), raw); err != nil {
				return err
			}
		}
		if !prune {
			return nil
		}
		c := sb.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if len(v) != 8 || time.UnixMilli(int64(binary.BigEndian.Uint64(v))).Before(now) {
				if err := c.Delete(); err != nil {
					return err
				}
			}
		}
		c = nb.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			var r senderRec
			if json.Unmarshal(v, &r) != nil || r.Seen.Before(staleBefore) {
				if err := c.Delete(); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// loadMemory reads the unexpired seen keys and the senders heard from since
// staleBefore.
func (s *Store) loadMemory(now, staleBefore time.Time) (seen []seenRec, senders []senderRec, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bktSeen); b != nil {
			if err := b.ForEach(func(k, v []byte) error {
				if len(v) == 8 {
					if exp := time.UnixMilli(int64(binary.BigEndian.Uint64(v))); exp.After(now) {
						seen = append(seen, seenRec{Key: string(k), Exp: exp})
					}
				}
				return nil
			}); err != nil {
				return err
			}
		}
		if b := tx.Bucket(bktSenders); b != nil {
			return b.ForEach(func(k, v []byte) error {
				var r senderRec
				if json.Unmarshal(v, &r) == nil && !r.Seen.Before(staleBefore) {
					senders = append(senders, r)
				}
				return nil
			})
		}
		return nil
	})
	return seen, senders, err
}

// binding is a sender's host as this gateway knows it.
type binding struct {
	host      string
	seen      time.Time
	persisted time.Time
}

// ownerLocked is the host gid lives on as far as this gateway knows: this
// one for its own entities, else the host whose signed heartbeat named it
// first, until that binding lapses; "" when none. A gid belongs to that
// host: another host's heartbeat claiming it is refused.
func (c *Core) ownerLocked(gid string, now time.Time) string {
	if c.ents[gid] != nil {
		return c.cfg.Host
	}
	if b := c.bindings[gid]; b != nil && now.Sub(b.seen) < c.cfg.MessageTTL {
		return b.host
	}
	return ""
}

// bindLocked records that gid lives on host (a verified heartbeat, its
// owner checked with ownerLocked).
func (c *Core) bindLocked(gid, host string, now time.Time) {
	b := c.bindings[gid]
	if b == nil || b.host != host {
		b = &binding{host: host}
		c.bindings[gid] = b
	}
	b.seen = now
	if now.Sub(b.persisted) > time.Hour {
		b.persisted = now
		c.dirtySenders = append(c.dirtySenders, senderRec{GID: gid, Host: host, Seen: now})
	}
}

// markSeenLocked records key (gid+msgId) as taken until env's expiry (past
// it, a copy is refused as expired anyway).
func (c *Core) markSeenLocked(key string, env *Envelope) {
	c.markSeenUntilLocked(key, env.ExpiresAt.Add(c.cfg.ClockSkew))
}

func (c *Core) markSeenUntilLocked(key string, exp time.Time) {
	if c.seen.has(key) {
		return
	}
	c.seen.add(key)
	c.dirtySeen = append(c.dirtySeen, seenRec{Key: key, Exp: exp})
}

// loadMemory restores the seen-set and the sender bindings at start.
func (c *Core) loadMemory() error {
	now := c.cfg.Now()
	seen, senders, err := c.st.loadMemory(now, now.Add(-c.cfg.MessageTTL))
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range seen {
		c.seen.add(r.Key)
	}
	for _, r := range senders {
		c.bindings[r.GID] = &binding{host: r.Host, seen: r.Seen, persisted: r.Seen}
	}
	return nil
}

// saveMemory writes the new seen keys and bindings (one commit); every
// minute it also prunes. Called by the sweeper.
func (c *Core) saveMemory(now time.Time) {
	c.mu.Lock()
	seen, senders := c.dirtySeen, c.dirtySenders
	c.dirtySeen, c.dirtySenders = nil, nil
	prune := now.Sub(c.memoryPruned) > time.Minute
	if prune {
		c.memoryPruned = now
		for gid, b := range c.bindings {
			if now.Sub(b.seen) > c.cfg.MessageTTL {
				delete(c.bindings, gid)
			}
		}
	}
	c.mu.Unlock()
	if len(seen) == 0 && len(senders) == 0 && !prune {
		return
	}
	if err := c.st.saveMemory(seen, senders, prune, now, now.Add(-c.cfg.MessageTTL)); err != nil {
		c.log.Error("saving the seen-set and sender bindings failed: a replay after a restart may pass", "err", err)
	}
}
