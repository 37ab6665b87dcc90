package opsui

import (
	"sync"
	"testing"
	"time"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestLoginCodeWorksOnce: a code starts one session; used again, or a
// made-up one, it starts none.
func TestLoginCodeWorksOnce(t *testing.T) {
	l := NewLogins(nil)
	code := l.NewCode()
	s, ok := l.Redeem(code)
	if !ok || !l.Valid(s) {
		t.Fatalf("first use: ok=%v valid=%v", ok, l.Valid(s))
	}
	if _, ok := l.Redeem(code); ok {
		t.Fatal("a code worked twice")
	}
	for _, bad := range []string{"", "x", s} {
		if _, ok := l.Redeem(bad); ok {
			t.Fatalf("code %q worked", bad)
		}
	}
	if l.Valid("") || l.Valid(code) || l.Valid("nope") {
		t.Fatal("something not a session counts as one")
	}
}

// TestLoginExpiry: a code dies after CodeTTL, a session after SessionTTL.
func TestLoginExpiry(t *testing.T) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	l := NewLogins(c.now)
	late := l.NewCode()
	soon := l.NewCode()
	c.add(CodeTTL - time.Second)
	s, ok := l.Redeem(soon)
	if !ok {
		t.Fatal("a code within its TTL failed")
	}
	c.add(time.Second)
	if _, ok := l.Redeem(late); ok {
		t.Fatal("an expired code worked")
	}
	c.add(SessionTTL - 2*time.Second)
	if !l.Valid(s) {
		t.Fatal("a session died before its TTL")
	}
	c.add(2 * time.Second)
	if l.Valid(s) {
		t.Fatal("a session outlived its TTL")
	}
}

// TestLoginsBounded: unused codes and sessions are capped; the oldest go.
func TestLoginsBounded(t *testing.T) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	l := NewLogins(c.now)
	first := l.NewCode()
	for i := 0; i < 3*maxCodes; i++ {
		c.add(time.Millisecond)
		l.NewCode()
	}
	if len(l.codes) > maxCodes {
		t.Fatalf("%d codes kept, cap %d", len(l.codes), maxCodes)
	}
	if _, ok := l.Redeem(first); ok {
		t.Fatal("the oldest code survived the cap")
	}
	var sessions []string
	for i := 0; i < 2*maxSessions; i++ {
		c.add(time.Millisecond)
		s, ok := l.Redeem(l.NewCode())
		if !ok {
			t.Fatal("redeem failed")
		}
		sessions = append(sessions, s)
	}
	if len(l.sessions) > maxSessions || l.Valid(sessions[0]) || !l.Valid(sessions[len(sessions)-1]) {
		t.Fatalf("%d sessions kept (cap %d); oldest valid %v", len(l.sessions), maxSessions, l.Valid(sessions[0]))
	}
}
