//go:build race

package bridge

import (
	"strings"
	"sync"
	"testing"
)

// lockPanic runs f and returns what it panicked with ("" for nothing).
func lockPanic(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg, _ = r.(string)
			if msg == "" {
				msg = "non-string panic"
			}
		}
	}()
	f()
	return ""
}

// The checker lets the documented order through and panics, before
// blocking, on each kind of inversion, taking the core's own mutexes.
func TestLockOrderCheckerCatchesInversions(t *testing.T) {
	var c Core
	a, b := newEntState(Entity{GID: "a", Name: "a"}, nil), newEntState(Entity{GID: "b", Name: "b"}, nil)
	reg, pres := newRegistry(), newPresence()
	if msg := lockPanic(func() {
		c.regMu.Lock()
		pres.pub.Lock()
		a.mu.Lock()
		reg.mu.Lock()
		reg.mu.Unlock()
		a.mu.Unlock()
		pres.pub.Unlock()
		c.regMu.Unlock()
	}); msg != "" {
		t.Fatalf("the documented order panicked: %s", msg)
	}
	cases := []struct {
		name        string
		first, then sync.Locker
		want        string
	}{
		{"regMu under an entity", &a.mu, &c.regMu, "taking regMu while holding an entity's mu"},
		{"two entities", &a.mu, &b.mu, "taking an entity's mu while holding an entity's mu"},
		{"an entity under a leaf", &reg.mu, &a.mu, "taking an entity's mu while holding a leaf lock"},
		{"two leaves", &reg.mu, &pres.mu, "taking a leaf lock while holding a leaf lock"},
		{"presence.pub under an entity", &a.mu, &pres.pub, "taking presence.pub while holding an entity's mu"},
	}
	for _, tc := range cases {
		tc.first.Lock()
		msg := lockPanic(tc.then.Lock)
		if msg == "" {
			tc.then.Unlock()
		}
		tc.first.Unlock()
		if !strings.Contains(msg, tc.want) {
			t.Errorf("%s: panic %q, want %q", tc.name, msg, tc.want)
		}
	}
	if _, ok := lockHeld.Load(goroutineID()); ok {
		t.Error("this goroutine still holds a level after releasing everything")
	}
}

// A lock released on another goroutine than the one that took it is
// reported too: the order is tracked per goroutine.
func TestLockOrderCheckerWantsTheSameGoroutine(t *testing.T) {
	var m leafMutex
	m.Lock()
	done := make(chan string)
	go func() { done <- lockPanic(m.Unlock) }()
	if msg := <-done; !strings.Contains(msg, "released by a goroutine that holds no lock") {
		t.Errorf("unlock on another goroutine: panic %q", msg)
	}
	m.Unlock()
}
