package keys

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Log keys.
const (
	logPath  = "path"
	logLine  = "line"
	logHosts = "hosts"
	logKeys  = "keys"
	logErr   = "err"
)

// Ring is what a gateway verifies envelopes with: the trust file's keys
// plus this host's own current and retired public keys (a gateway's own
// messages come back to it through the broker). It is safe for concurrent
// use: Verify reads an immutable snapshot that Reload swaps atomically.
type Ring struct {
	stateDir, ownHost string
	log               *slog.Logger

	set atomic.Pointer[ringSet]

	mu    sync.Mutex // serializes Reload; guards seen
	seen  stamp      // files as they were when last (re)loaded
	ready bool       // seen is set
}

// ringSet is one immutable generation of the ring.
type ringSet struct {
	hosts map[string]*hostKeys
	keys  int // total keys
}

// hostKeys are the keys of one host. During a rotation a host has several;
// Verify tries the one that verified last first, so a failed attempt (it
// costs as much as a success, and allocates) is the exception.
type hostKeys struct {
	keys []ed25519.PublicKey
	last atomic.Int32 // index into keys
}

// NewRing loads the trust file of stateDir (absent: no other host is
// trusted) and this host's own keys: stateDir/host_ed25519 (absent: none
// yet) and every key in stateDir/retired_keys/. A trust file that does not
// parse is an error. log may be nil. NewRing starts nothing; call Watch to
// follow the trust file.
func NewRing(stateDir, ownHost string, log *slog.Logger) (*Ring, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Ring{stateDir: stateDir, ownHost: ownHost, log: log}
	if err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// Verify checks sig over msg against host's keys. It returns
// ErrUnknownHost if host has no key, ErrBadSignature if sig verifies under
// none of them (both unwrapped, so callers may compare with ==). It does no
// file I/O and no allocation.
func (r *Ring) Verify(host string, msg, sig []byte) error {
	s := r.set.Load()
	if s == nil {
		return ErrUnknownHost
	}
	hk := s.hosts[host]
	if hk == nil || len(hk.keys) == 0 {
		return ErrUnknownHost
	}
	if len(sig) != ed25519.SignatureSize {
		return ErrBadSignature
	}
	last := int(hk.last.Load())
	if ed25519.Verify(hk.keys[last], msg, sig) {
		return nil
	}
	for i, k := range hk.keys {
		if i != last && ed25519.Verify(k, msg, sig) {
			hk.last.Store(int32(i))
			return nil
		}
	}
	return ErrBadSignature
}

// Hosts returns host → fingerprints of its keys (trust file order, then
// this host's own current and retired keys), a fresh map the caller owns.
func (r *Ring) Hosts() map[string][]string {
	out := make(map[string][]string)
	s := r.set.Load()
	if s == nil {
		return out
	}
	for h, hk := range s.hosts {
		fps := make([]string, len(hk.keys))
		for i, k := range hk.keys {
			fps[i] = Fingerprint(k)
		}
		out[h] = fps
	}
	return out
}

// Reload re-reads the trust file and this host's own keys. On an error
// (a trust file line that does not parse, an own key that cannot be read)
// the ring keeps its previous keys and returns the error.
func (r *Ring) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen, r.ready = r.stamp(), true // before reading: a later change is seen by the next check
	s, err := r.read()
	if err != nil {
		return err
	}
	r.set.Store(s)
	return nil
}

// Watch reloads the ring whenever the trust file (or this host's key
// file, or retired_keys/) changes mtime, size or inode, checking every
// `every` (2s if not positive), until ctx ends. Each reload logs one line:
// Info with the number of hosts and keys, or Error with the bad line when
// the new file does not parse (the previous keys stay in use; the error is
// logged once per change, not on every check).
func (r *Ring) Watch(ctx context.Context, every time.Duration) {
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
		r.mu.Lock()
		changed := !r.ready || !r.seen.equal(r.stamp())
		r.mu.Unlock()
		if !changed {
			continue
		}
		path := filepath.Join(r.stateDir, TrustFile)
		if err := r.Reload(); err != nil {
			var te *TrustError
			if errors.As(err, &te) {
				r.log.Error("trust file not reloaded: it has a bad line; still verifying with the previous keys",
					logPath, path, logLine, te.Line, logErr, err)
			} else {
				r.log.Error("trust file not reloaded; still verifying with the previous keys", logPath, path, logErr, err)
			}
			continue
		}
		s := r.set.Load()
		r.log.Info("trust file reloaded", logPath, path, logHosts, len(s.hosts), logKeys, s.keys)
	}
}

// read builds a new generation from the files.
func (r *Ring) read() (*ringSet, error) {
	trust, err := ReadTrust(filepath.Join(r.stateDir, TrustFile))
	if err != nil {
		return nil, err
	}
	own, err := r.ownKeys()
	if err != nil {
		return nil, err
	}
	if len(own) > 0 {
		mine := append([]ed25519.PublicKey(nil), trust[r.ownHost]...)
		for _, k := range own {
			if !containsKey(mine, k) {
				mine = append(mine, k)
			}
		}
		trust[r.ownHost] = mine
	}
	s := &ringSet{hosts: make(map[string]*hostKeys, len(trust))}
	for h, ks := range trust {
		s.hosts[h] = &hostKeys{keys: ks}
		s.keys += len(ks)
	}
	return s, nil
}

// ownKeys returns this host's current key (if any) and its retired keys.
// A retired key that cannot be loaded is logged and skipped: it only
// matters for messages signed before a rotation.
func (r *Ring) ownKeys() ([]ed25519.PublicKey, error) {
	var own []ed25519.PublicKey
	k, err := load(filepath.Join(r.stateDir, KeyFile))
	switch {
	case err == nil:
		own = append(own, k.pub)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	dir := filepath.Join(r.stateDir, RetiredDir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return own, nil
		}
		return nil, fmt.Errorf("keys: %w", err)
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		if n := e.Name(); isRetiredName(n) && e.Type().IsRegular() {
			names = append(names, n)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(names))) // newest first, roughly
	for _, n := range names {
		k, err := load(filepath.Join(dir, n))
		if err != nil {
			r.log.Warn("retired host key skipped", logPath, filepath.Join(dir, n), logErr, err)
			continue
		}
		own = append(own, k.pub)
	}
	return own, nil
}

// isRetiredName reports whether n is a file Rotate writes into
// retired_keys/: host_ed25519.<unix seconds>[.<n>].
func isRetiredName(n string) bool {
	rest, ok := strings.CutPrefix(n, KeyFile+".")
	if !ok || rest == "" {
		return false
	}
	for _, c := range rest {
		if (c < '0' || c > '9') && c != '.' {
			return false
		}
	}
	return true
}

// stamp identifies the state of the files a ring is loaded from.
type stamp [3]fileStamp

type fileStamp struct {
	fi fs.FileInfo // nil: absent
}

func (r *Ring) stamp() stamp {
	return stamp{
		statFile(filepath.Join(r.stateDir, TrustFile)),
		statFile(filepath.Join(r.stateDir, KeyFile)),
		statFile(filepath.Join(r.stateDir, RetiredDir)),
	}
}

func statFile(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{fi: fi}
}

func (s stamp) equal(o stamp) bool {
	for i := range s {
		a, b := s[i].fi, o[i].fi
		if (a == nil) != (b == nil) {
			return false
		}
		if a != nil && (!os.SameFile(a, b) || !a.ModTime().Equal(b.ModTime()) || a.Size() != b.Size() || a.Mode() != b.Mode()) {
			return false
		}
	}
	return true
}
