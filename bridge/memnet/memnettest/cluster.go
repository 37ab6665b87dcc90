// Package memnettest runs several gateways' bridge cores in one test
// process, on one memnet.Network: each host has its own state store, its
// own Ed25519 host key, and a trust ring of the others' keys, as a
// deployment of gateways on different machines sharing a broker would —
// with heartbeats every few tens of milliseconds, so cross-host scenarios
// (presence, routing, signing, spawn) take milliseconds.
//
// It uses only the exported API of bridge, keys and memnet; it starts no
// MCP server and no herdr client (a test gives the cores an Injector or a
// SpawnHandler when it needs one).
package memnettest

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/memnet"
	"github.com/herdbridge/herdbridge/bridge/store"
	"github.com/herdbridge/herdbridge/keys"
)

// Tunables every host starts with: short enough that a scenario takes
// milliseconds, long enough that a loaded machine running the race
// detector does not lose a heartbeat's worth of presence.
const (
	PresenceEvery = 100 * time.Millisecond
	PresenceTTL   = 2 * time.Second
	SweepEvery    = 50 * time.Millisecond
	MaxWait       = 5 * time.Second
)

// Cluster is a set of gateways on one in-memory network.
type Cluster struct {
	t   testing.TB
	Net *memnet.Network
	// Logger is given to every core started after it is set (default:
	// discard); a tune function can give one core its own.
	Logger *slog.Logger

	mu      sync.Mutex
	hosts   []*Host                        // running
	trusted map[string][]ed25519.PublicKey // every key a gateway of this cluster trusts, by host
}

// Host is one gateway of the cluster.
type Host struct {
	ID        string
	Core      *bridge.Core
	Transport *memnet.Transport
	Key       *keys.HostKey
	Dir       string // its state directory

	ring  *keys.Ring
	store *store.Store
	once  sync.Once
}

// New starts a cluster with a gateway per host id; everything stops when
// the test ends.
func New(t testing.TB, hosts ...string) *Cluster {
	t.Helper()
	c := &Cluster{t: t, Net: memnet.New(memnet.Options{}), Logger: slog.New(slog.DiscardHandler), trusted: map[string][]ed25519.PublicKey{}}
	t.Cleanup(c.close)
	for _, h := range hosts {
		c.Start(h)
	}
	return c
}

// Start starts a gateway for host (tune adjusts its config after the
// cluster's defaults) and makes it and every running gateway trust each
// other. It fails the test if the core does not start; TryStart returns
// the error.
func (c *Cluster) Start(host string, tune ...func(*bridge.Config)) *Host {
	c.t.Helper()
	h, err := c.TryStart(host, tune...)
	if err != nil {
		c.t.Fatalf("start gateway %s: %v", host, err)
	}
	return h
}

// TryStart is Start returning the core's error.
func (c *Cluster) TryStart(host string, tune ...func(*bridge.Config)) (*Host, error) {
	c.t.Helper()
	dir := c.t.TempDir()
	key, _, err := keys.LoadOrCreate(dir, host)
	if err != nil {
		c.t.Fatalf("host key of %s: %v", host, err)
	}
	h := &Host{ID: host, Key: key, Dir: dir}
	c.join(h) // trust before traffic, as operators do
	return c.boot(h, tune...)
}

// StartAll starts a gateway per host id on a cluster with none running
// yet, every one trusting every other: each trust file is written once
// (Start's join rewrites every running host's, O(G²) writes and reloads
// per start, too slow for hundreds of hosts).
func (c *Cluster) StartAll(ids []string, tune ...func(*bridge.Config)) []*Host {
	c.t.Helper()
	return c.StartAllAfter(ids, nil, tune...)
}

// StartAllAfter is StartAll calling before (when not nil) with each host's
// key, trust file and state directory in place, before any gateway starts:
// what a host's store should hold at its start is put there then.
func (c *Cluster) StartAllAfter(ids []string, before func(*Host), tune ...func(*bridge.Config)) []*Host {
	c.t.Helper()
	hosts := make([]*Host, len(ids))
	for i, id := range ids {
		dir := c.t.TempDir()
		key, _, err := keys.LoadOrCreate(dir, id)
		if err != nil {
			c.t.Fatalf("host key of %s: %v", id, err)
		}
		hosts[i] = &Host{ID: id, Key: key, Dir: dir}
	}
	c.mu.Lock()
	if len(c.hosts) > 0 {
		c.mu.Unlock()
		c.t.Fatal("StartAll on a cluster with gateways running")
	}
	for _, h := range hosts {
		c.trusted[h.ID] = append(c.trusted[h.ID], h.Key.Public())
	}
	line := map[string]string{}
	for host, pubs := range c.trusted {
		for _, pub := range pubs {
			line[host] += host + " " + keys.FormatPublicKey(pub) + "\n"
		}
	}
	c.mu.Unlock()
	for _, h := range hosts {
		var b strings.Builder
		for host, l := range line {
			if host != h.ID {
				b.WriteString(l)
			}
		}
		if err := os.WriteFile(filepath.Join(h.Dir, keys.TrustFile), []byte(b.String()), 0o600); err != nil {
			c.t.Fatal(err)
		}
	}
	if before != nil {
		for _, h := range hosts {
			before(h)
		}
	}
	for i, h := range hosts {
		var err error
		if hosts[i], err = c.boot(h, tune...); err != nil {
			c.t.Fatalf("start gateway %s: %v", h.ID, err)
		}
	}
	return hosts
}

// Restart stops h's gateway and starts a new one in its state directory
// (same host key, trust and state store, a new connection): a gateway
// restart, as the others see it. It returns the new Host.
func (c *Cluster) Restart(h *Host, tune ...func(*bridge.Config)) *Host {
	c.t.Helper()
	c.Stop(h)
	n, err := c.boot(&Host{ID: h.ID, Key: h.Key, Dir: h.Dir}, tune...)
	if err != nil {
		c.t.Fatalf("restart gateway %s: %v", h.ID, err)
	}
	return n
}

// boot opens h's ring and store in h.Dir, connects it and starts its core.
func (c *Cluster) boot(h *Host, tune ...func(*bridge.Config)) (*Host, error) {
	c.t.Helper()
	host, key := h.ID, h.Key
	var err error
	if h.ring, err = keys.NewRing(h.Dir, host, c.Logger); err != nil {
		c.t.Fatalf("trust ring of %s: %v", host, err)
	}
	if h.store, err = store.Open(filepath.Join(h.Dir, "bridge.db"), 0); err != nil {
		c.t.Fatalf("store of %s: %v", host, err)
	}
	h.Transport = c.Net.Connect()
	cfg := bridge.Config{
		Host: host, Transport: h.Transport, Store: h.store, Logger: c.Logger.With("host", host),
		Signer: key, Verifier: RingVerifier{h.ring}, KeyFingerprint: key.Fingerprint(), Trusted: h.ring.Hosts,
		PresenceEvery: PresenceEvery, PresenceTTL: PresenceTTL, SweepEvery: SweepEvery, MaxWait: MaxWait,
		ReceiptWait: 2 * time.Second, InjectWait: 2 * time.Second,
	}
	for _, f := range tune {
		f(&cfg)
	}
	if h.Core, err = bridge.New(cfg); err == nil {
		err = h.Core.Start(context.Background())
	}
	if err != nil {
		h.stop()
		return nil, err
	}
	c.mu.Lock()
	c.hosts = append(c.hosts, h)
	c.mu.Unlock()
	return h, nil
}

// join has h trust every key trusted so far, and every running gateway
// trust h's.
func (c *Cluster) join(h *Host) {
	c.t.Helper()
	c.mu.Lock()
	for host, pubs := range c.trusted {
		for _, pub := range pubs {
			if host != h.ID {
				c.trustOn(h.Dir, host, pub)
			}
		}
	}
	c.mu.Unlock()
	c.Trust(h.ID, h.Key.Public())
}

// Trust has every gateway, running or started later, trust pub for host:
// an outside host (a peer with no gateway here, or a compromised one) gets
// in this way.
func (c *Cluster) Trust(host string, pub ed25519.PublicKey) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.trusted[host] = append(c.trusted[host], pub) // a second gateway with a host id in use brings a second key
	for _, h := range c.hosts {
		if h.ID == host {
			continue
		}
		c.trustOn(h.Dir, host, pub)
		if err := h.ring.Reload(); err != nil {
			c.t.Fatalf("reload the trust ring of %s: %v", h.ID, err)
		}
	}
}

// Distrust has on stop trusting host (every key of it), as `herdbridge
// keys revoke` and a trust file reload would.
func (c *Cluster) Distrust(on *Host, host string) {
	c.t.Helper()
	if _, err := keys.Revoke(filepath.Join(on.Dir, keys.TrustFile), host, nil); err != nil {
		c.t.Fatalf("revoke %s on %s: %v", host, on.ID, err)
	}
	if err := on.ring.Reload(); err != nil {
		c.t.Fatalf("reload the trust ring of %s: %v", on.ID, err)
	}
}

func (c *Cluster) trustOn(dir, host string, pub ed25519.PublicKey) {
	c.t.Helper()
	if err := keys.Trust(filepath.Join(dir, keys.TrustFile), host, pub); err != nil {
		c.t.Fatalf("trust %s in %s: %v", host, dir, err)
	}
}

// Hosts are the running gateways, in start order.
func (c *Cluster) Hosts() []*Host {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.hosts)
}

// Stop stops h's gateway as a crash would look to the others: its core,
// its connection and its store close; its durable inboxes stay on the
// network. Idempotent.
func (c *Cluster) Stop(h *Host) {
	c.mu.Lock()
	c.hosts = slices.DeleteFunc(c.hosts, func(o *Host) bool { return o == h })
	c.mu.Unlock()
	h.stop()
}

func (h *Host) stop() {
	h.once.Do(func() {
		if h.Core != nil {
			_ = h.Core.Close()
		}
		_ = h.Transport.Close()
		_ = h.store.Close()
	})
}

func (c *Cluster) close() {
	for _, h := range c.Hosts() {
		c.Stop(h)
	}
	c.Net.Close()
}

// Register registers name on h, failing the test on error.
func (h *Host) Register(t testing.TB, name string, role bridge.Role, groups ...string) bridge.Entity {
	t.Helper()
	e, _, err := h.Core.Register(context.Background(), bridge.RegisterRequest{Name: name, Role: role, Groups: groups})
	if err != nil {
		t.Fatalf("register %s on %s: %v", name, h.ID, err)
	}
	return e
}

// Sees reports whether h's roster has target (name@host) present.
func (h *Host) Sees(target string) bool {
	_, err := h.Core.Resolve(target)
	return err == nil
}

// SeesHost reports whether h's roster lists host (from its verified
// heartbeats: an untrusted host listed from refused ones does not count).
func (h *Host) SeesHost(host string) bool {
	for _, v := range h.Core.Roster().Hosts {
		if v.Host == host && v.Trust != bridge.TrustUntrusted {
			return true
		}
	}
	return false
}

// Converge waits until every running gateway sees every other one and
// every entity registered on it.
func (c *Cluster) Converge(t testing.TB) {
	t.Helper()
	Eventually(t, "every gateway sees every other one and its entities", func() bool {
		hosts := c.Hosts()
		for _, h := range hosts {
			for _, o := range hosts {
				if o == h {
					continue
				}
				if !h.SeesHost(o.ID) {
					return false
				}
				for _, e := range o.Core.Roster().Entities {
					if e.Host == o.ID && !h.Sees(e.Addr()) {
						return false
					}
				}
			}
		}
		return true
	})
}

// Timeout bounds every Eventually: far above what a scenario needs.
const Timeout = 10 * time.Second

// Eventually polls cond until it holds, failing the test after Timeout.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: not yet: %s", Timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// RingVerifier adapts keys.Ring to bridge.Verifier, as the gateway does.
type RingVerifier struct{ Ring *keys.Ring }

// Verify implements bridge.Verifier.
func (v RingVerifier) Verify(host string, msg, sig []byte) error {
	err := v.Ring.Verify(host, msg, sig)
	if errors.Is(err, keys.ErrUnknownHost) {
		return fmt.Errorf("%w: %s", bridge.ErrUnknownHost, host)
	}
	return err
}
