package keys

import (
	"context"
	"crypto/hpke"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// SealKeys are this host's HPKE private keys: the current one (what
// heartbeats publish and peers seal to) and the retired ones younger than
// SealRetention, so a message sealed to a key rotated away while it was in
// flight still opens. A sealed envelope names its key id; Private finds
// the key by it. Safe for concurrent use: readers take an immutable
// snapshot that Reload swaps.
type SealKeys struct {
	stateDir, host string
	log            *slog.Logger
	now            func() time.Time

	set atomic.Pointer[sealSet]

	mu   sync.Mutex // serializes Reload; guards seen
	seen [2]fileStamp
}

type sealSet struct {
	current *SealKey
	byID    map[string]*SealKey
}

// NewSealKeys loads (or, on first start, creates) stateDir/host_hpke and
// the retired HPKE keys still inside their window.
func NewSealKeys(stateDir, host string, log *slog.Logger) (*SealKeys, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if _, _, err := LoadOrCreateSealKey(stateDir, host); err != nil {
		return nil, err
	}
	s := &SealKeys{stateDir: stateDir, host: host, log: log, now: time.Now}
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Current returns this host's current HPKE key.
func (s *SealKeys) Current() *SealKey { return s.set.Load().current }

// Private returns the key with id, current or retired; false when this
// host has no such key (never had it, or it is past SealRetention).
func (s *SealKeys) Private(id string) (hpke.PrivateKey, bool) {
	k := s.set.Load().byID[id]
	if k == nil {
		return nil, false
	}
	return k.priv, true
}

// IDs lists the key ids this host can open, current first.
func (s *SealKeys) IDs() []string {
	set := s.set.Load()
	ids := []string{set.current.id}
	for id := range set.byID {
		if id != set.current.id {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids[1:])
	return ids
}

// Reload re-reads the current key and the retired ones. On an error the
// previous keys stay in use.
func (s *SealKeys) Reload() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = s.stamp()
	cur, err := loadSealKey(filepath.Join(s.stateDir, SealKeyFile))
	if err != nil {
		return err
	}
	set := &sealSet{current: cur, byID: map[string]*SealKey{cur.id: cur}}
	if err := s.readRetired(set); err != nil {
		return err
	}
	s.set.Store(set)
	return nil
}

// readRetired adds the retired keys inside the window to set. A retired
// key that does not load is logged and skipped.
func (s *SealKeys) readRetired(set *sealSet) error {
	dir := filepath.Join(s.stateDir, RetiredDir)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("keys: %w", err)
	}
	now := s.now()
	for _, e := range ents {
		at, ok := retiredSealAge(e.Name())
		if !ok || !e.Type().IsRegular() || now.Sub(at) > SealRetention {
			continue
		}
		k, err := loadSealKey(filepath.Join(dir, e.Name()))
		if err != nil {
			s.log.Warn("retired HPKE key skipped", logPath, filepath.Join(dir, e.Name()), logErr, err)
			continue
		}
		set.byID[k.id] = k
	}
	return nil
}

func (s *SealKeys) stamp() [2]fileStamp {
	return [2]fileStamp{statFile(filepath.Join(s.stateDir, SealKeyFile)), statFile(filepath.Join(s.stateDir, RetiredDir))}
}

func (s *SealKeys) changed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !stamp{s.seen[0], s.seen[1]}.equal(stamp{s.stamp()[0], s.stamp()[1]})
}

// Watch reloads the keys when host_hpke or retired_keys/ changes (a
// `herdbridge keys rotate` on a running gateway), checking every `every`,
// until ctx ends.
func (s *SealKeys) Watch(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = 2 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !s.changed() {
			continue
		}
		if err := s.Reload(); err != nil {
			s.log.Error("HPKE keys not reloaded; still opening with the previous ones", logErr, err)
			continue
		}
		s.log.Info("HPKE keys reloaded", "current", s.Current().ID(), logKeys, len(s.set.Load().byID))
	}
}
