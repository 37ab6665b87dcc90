package store

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Lazy request records: the record of an idempotent call is written on
// the call's path, right after its message went out. Committing it there
// cost a send a second fsync. Instead it goes to state.db's journal (one
// write(2): a crashed process loses nothing) and is committed within
// lazyCommitDelay, off the call's path. An OS crash or power loss can lose
// the last records: a retry of such a call after it publishes again
// (at-least-once, as without a request id). PutRequestLazy returns nil only
// once the record is in the journal or committed: an error (a full disk
// refusing both) means the record is not durable, and the bridge then
// refuses to publish (bridge/requestintent.go).

// lazyCommitDelay is how long journaled records wait to be committed
// together: one commit (two fdatasyncs) a second, not one per tenth of a
// second, which cost a round trip of a slow client a fifth of an fdatasync
// (issue 25). What an OS crash can lose grows to that second.
const lazyCommitDelay = time.Second

// journalSuffix names the journal beside the state file.
const journalSuffix = ".journal"

type lazyPuts struct {
	mu         sync.Mutex
	journal    *Journal
	pending    map[string][]byte // request key → record, not yet committed
	committing map[string][]byte // taken by the commit under way
	closed     bool
}

// openLazy opens the journal and commits what a previous process left in
// it.
func (s *Store) openLazy() error {
	j, payloads, _, err := OpenJournal(s.path + journalSuffix)
	if err != nil {
		return err
	}
	s.lazy = &lazyPuts{journal: j, pending: map[string][]byte{}}
	if len(payloads) == 0 {
		return nil
	}
	// in append order: a later version of a record wins
	err = s.db.Update(func(tx *bolt.Tx) error {
		for _, p := range payloads {
			if err := putRequestTx(tx, p); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		j.Close()
		return fmt.Errorf("bridge: replaying %d journaled request ids into %s: %w: if the disk is full, free space and start the gateway again (the journal is kept)", len(payloads), s.path, err)
	}
	return j.Rewrite(nil)
}

// PutRequestLazy records (or updates) an idempotent call like PutRequest,
// safe against a process crash at once and committed within
// lazyCommitDelay. A journal that cannot be written commits at once.
func (s *Store) PutRequestLazy(r Request) error {
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	l := s.lazy
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return fmt.Errorf("bridge: state file closed")
	}
	if err := s.appendJournal(raw); err != nil {
		l.mu.Unlock()
		return s.PutRequest(r) // its fsync is paid only when the journal cannot take the record
	}
	l.pending[string(requestKey(r.GID, r.ID))] = raw
	l.mu.Unlock()
	s.writer.CommitSoon() // the next commit carries it, or one alone after lazyCommitDelay
	return nil
}

// appendJournal appends one record to the journal (l.mu held).
func (s *Store) appendJournal(raw []byte) error {
	if err := s.errDiskFull(); err != nil {
		return err
	}
	return s.lazy.journal.Append(raw)
}

// pendingRequests copies the journaled records not yet committed.
func (s *Store) pendingRequests() map[string][]byte {
	l := s.lazy
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string][]byte, len(l.pending)+len(l.committing))
	for k, raw := range l.committing {
		out[k] = raw
	}
	for k, raw := range l.pending {
		out[k] = raw
	}
	return out
}

// pendingRequest is the journaled, not yet committed version of the record
// under key, nil if none.
func (s *Store) pendingRequest(key string) []byte {
	l := s.lazy
	l.mu.Lock()
	defer l.mu.Unlock()
	if raw, ok := l.pending[key]; ok {
		return raw
	}
	return l.committing[key]
}

// lazyWork hands the journaled records to the commit the store's writer
// is making (its extra work): they ride whatever else it writes. The
// journal is emptied only when nothing was added meanwhile: a replay
// applies records in order, so a journal that keeps older versions
// behind newer ones must keep them all.
func (s *Store) lazyWork() (func(*bolt.Tx) error, func(error)) {
	l := s.lazy
	l.mu.Lock()
	batch := l.pending
	if len(batch) == 0 {
		l.mu.Unlock()
		return nil, nil
	}
	l.pending, l.committing = map[string][]byte{}, batch
	l.mu.Unlock()
	apply := func(tx *bolt.Tx) error {
		if err := s.errDiskFull(); err != nil {
			return err
		}
		for _, raw := range batch {
			if err := putRequestTx(tx, raw); err != nil {
				return err
			}
		}
		return nil
	}
	return apply, func(err error) { s.lazyCommitted(batch, err) }
}

// lazyCommitted ends batch's commit: put back to be tried again, or the
// journal emptied when nothing newer waits.
func (s *Store) lazyCommitted(batch map[string][]byte, err error) {
	l := s.lazy
	l.mu.Lock()
	l.committing = nil
	if err == nil {
		if len(l.pending) == 0 {
			_ = l.journal.Rewrite(nil) // a failure leaves records that replay harmlessly
		}
		l.mu.Unlock()
		return
	}
	for k, raw := range batch { // tried again with the next commit
		if _, newer := l.pending[k]; !newer {
			l.pending[k] = raw
		}
	}
	l.mu.Unlock()
	s.writer.CommitSoon()
}

// closeLazy commits what is still pending (the writer has stopped) and
// closes the journal; what cannot be committed stays journaled.
func (s *Store) closeLazy() error {
	l := s.lazy
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	if apply, done := s.lazyWork(); apply != nil {
		done(s.db.Update(apply))
	}
	return l.journal.Close()
}
