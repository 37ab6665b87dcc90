package opsui

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net"
	"sync"
	"time"
)

// Operator logins: `herdbridge ui` asks the gateway over its admin socket
// (whose peer is checked to run as the gateway's user) for a one-time
// code; the browser trades it at /ui/login for a session, carried from
// then on in an HttpOnly cookie, so no secret stays in a URL. A code works
// once and expires after CodeTTL; a session after SessionTTL. Both live in
// memory only: a restarted gateway forgets them, and the page asks for a
// new `herdbridge ui`. Secrets are kept by their SHA-256, so a lookup
// leaks nothing through its timing and a memory dump holds no usable code.

// Login lifetimes and caps.
const (
	CodeTTL     = 2 * time.Minute
	SessionTTL  = 12 * time.Hour
	maxCodes    = 16 // unused codes kept; a 17th evicts the one expiring first
	maxSessions = 64 // sessions kept; a 65th evicts the one expiring first
)

// CookieName is the operator session cookie of the gateway listening on
// addr. Cookies ignore ports, so two gateways on one host (two state
// dirs) need two names, or logging in to one logs out of the other.
func CookieName(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return "herdbridge_operator"
	}
	return "herdbridge_operator_" + port
}

type secret [sha256.Size]byte

// Logins holds the one-time codes and the operator sessions.
type Logins struct {
	now      func() time.Time
	mu       sync.Mutex
	codes    map[secret]time.Time // expiry
	sessions map[secret]time.Time // expiry
}

// NewLogins makes an empty set; now is the clock (nil: time.Now).
func NewLogins(now func() time.Time) *Logins {
	if now == nil {
		now = time.Now
	}
	return &Logins{now: now, codes: map[secret]time.Time{}, sessions: map[secret]time.Time{}}
}

// NewCode mints a one-time login code.
func (l *Logins) NewCode() string {
	code := randomToken()
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	prune(l.codes, now, maxCodes)
	l.codes[sha256.Sum256([]byte(code))] = now.Add(CodeTTL)
	return code
}

// Redeem consumes code and starts a session: its id, or false when code
// is unknown, used or expired.
func (l *Logins) Redeem(code string) (session string, ok bool) {
	if code == "" {
		return "", false
	}
	h := sha256.Sum256([]byte(code))
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	exp, found := l.codes[h]
	delete(l.codes, h)
	if !found || !now.Before(exp) {
		return "", false
	}
	session = randomToken()
	prune(l.sessions, now, maxSessions)
	l.sessions[sha256.Sum256([]byte(session))] = now.Add(SessionTTL)
	return session, true
}

// Valid reports whether session is a live operator session.
func (l *Logins) Valid(session string) bool {
	if session == "" {
		return false
	}
	h := sha256.Sum256([]byte(session))
	l.mu.Lock()
	defer l.mu.Unlock()
	exp, ok := l.sessions[h]
	if ok && !l.now().Before(exp) {
		delete(l.sessions, h)
		return false
	}
	return ok
}

// prune drops what expired, then, while m is at its cap, the entry
// expiring first.
func prune(m map[secret]time.Time, now time.Time, max int) {
	for k, exp := range m {
		if !now.Before(exp) {
			delete(m, k)
		}
	}
	for len(m) >= max {
		var first secret
		var at time.Time
		for k, exp := range m {
			if at.IsZero() || exp.Before(at) {
				first, at = k, exp
			}
		}
		delete(m, first)
	}
}

// randomToken is 32 random bytes, URL-safe.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it panics first)
	return base64.RawURLEncoding.EncodeToString(b)
}
