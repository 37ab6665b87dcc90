package bridge_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/herdbridge/herdbridge/bridge"
)

// TestAuthTokenShape: tokens carry 256 random bits and are kept as their
// SHA-256 only.
func TestAuthTokenShape(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 100; i++ {
		tok, hash := bridge.NewToken()
		raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(tok, "hb_"))
		if err != nil || !strings.HasPrefix(tok, "hb_") || len(raw) != 32 {
			t.Fatalf("token %q: %d bytes, %v", tok, len(raw), err)
		}
		sum := sha256.Sum256([]byte(tok))
		if hash != hex.EncodeToString(sum[:]) || bridge.HashToken(tok) != hash {
			t.Fatalf("hash of %q is %s", tok, hash)
		}
		if seen[tok] {
			t.Fatal("token repeated")
		}
		seen[tok] = true
	}
}

// TestRevokeTokens: every token of the entity stops authenticating at once
// and after a restart; other entities' tokens are untouched; the entity
// keeps its gid and gets a working token by registering again.
func TestRevokeTokens(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	reg := func(name string) (bridge.Entity, string) {
		t.Helper()
		e, tok, err := h.c.Register(ctx, bridge.RegisterRequest{Name: name, Role: bridge.RolePrimary})
		if err != nil {
			t.Fatal(err)
		}
		return e, tok
	}
	a, t1 := reg("a")
	_, t2 := reg("a")
	b, tb := reg("b")
	e, n, err := h.c.RevokeTokens("a@h1")
	if err != nil || n != 2 || e.GID != a.GID {
		t.Fatalf("revoke: %+v %d %v", e, n, err)
	}
	check := func(when string) {
		t.Helper()
		for _, tok := range []string{t1, t2} {
			if _, ok := h.c.Authenticate(tok); ok {
				t.Fatalf("%s: a revoked token authenticates", when)
			}
		}
		if got, ok := h.c.Authenticate(tb); !ok || got.GID != b.GID {
			t.Fatalf("%s: b's token: %+v %v", when, got, ok)
		}
	}
	check("at once")
	h.restart()
	check("after a restart")
	a2, t3 := reg("a")
	if a2.GID != a.GID {
		t.Fatalf("re-registered as %s, was %s", a2.GID, a.GID)
	}
	if got, ok := h.c.Authenticate(t3); !ok || got.GID != a.GID {
		t.Fatalf("new token: %+v %v", got, ok)
	}
	var ue *bridge.UserError
	if _, _, err := h.c.RevokeTokens("nobody"); !errors.As(err, &ue) || !strings.Contains(err.Error(), `no entity named "nobody"`) {
		t.Fatalf("unknown name: %v", err)
	}
	if _, _, err := h.c.RevokeTokens("a@h2"); !errors.As(err, &ue) {
		t.Fatalf("another host's name: %v", err)
	}
	if _, ok := h.c.Authenticate(""); ok {
		t.Fatal("the empty token authenticates")
	}
}
