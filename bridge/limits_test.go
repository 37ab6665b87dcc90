package bridge_test

// The limits on what callers hand the core (limits.go): each refused with a
// UserError that names the limit and echoes at most a short quoted prefix.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/store"
)

// wantRefused checks err is a short UserError that mentions each of want.
func wantRefused(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if !isUserError(err) {
		t.Fatalf("%s: got %v (%T), want a *bridge.UserError", what, err, err)
	}
	if len(err.Error()) > 400 {
		t.Fatalf("%s: the error is %d bytes long: %.200q…", what, len(err.Error()), err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("%s: error %q does not mention %q", what, err, w)
		}
	}
}

func TestClip(t *testing.T) {
	if got := bridge.Clip("abc"); got != `"abc"` {
		t.Fatalf("Clip(abc) = %s", got)
	}
	long := strings.Repeat("é", 100) // 2 bytes each: 64 bytes is 32 runes
	got := bridge.Clip(long)
	if want := `"` + strings.Repeat("é", 32) + `"… (200 bytes)`; got != want {
		t.Fatalf("Clip(long) = %s, want %s", got, want)
	}
	if got := bridge.Clip("a\x1b[2Jb\x00"); got != `"a\x1b[2Jb\x00"` {
		t.Fatalf("escape bytes not quoted: %s", got)
	}
	odd := "x" + strings.Repeat("é", 40) // the cut falls inside a rune
	if got := bridge.Clip(odd); !strings.HasPrefix(got, `"x`+strings.Repeat("é", 31)+`"…`) {
		t.Fatalf("Clip(odd) = %s", got)
	}
}

func TestRegisterLimits(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	a := h.reg("a", bridge.RolePrimary)
	reg := func(req bridge.RegisterRequest) error {
		if req.Role == "" {
			req.Role = bridge.RoleWorker
		}
		_, _, err := h.c.Register(ctx, req)
		return err
	}
	groups := func(n int) []string {
		var gs []string
		for i := range n {
			gs = append(gs, fmt.Sprintf("g%d", i))
		}
		return gs
	}
	refused := []struct {
		name string
		req  bridge.RegisterRequest
		want []string
	}{
		{"name is another's gid", bridge.RegisterRequest{Name: a.GID}, []string{"looks like a gid"}},
		{"name is a gid in capitals", bridge.RegisterRequest{Name: strings.ToUpper(uuid.NewString())}, []string{"looks like a gid"}},
		{"name is a gid without dashes", bridge.RegisterRequest{Name: strings.ReplaceAll(uuid.NewString(), "-", "")}, []string{"looks like a gid"}},
		{"name too long", bridge.RegisterRequest{Name: strings.Repeat("n", 65)}, []string{"not valid", "64"}},
		{"name of escapes", bridge.RegisterRequest{Name: "\x1b[2J" + strings.Repeat("x", 5000)}, []string{`"\x1b[2J`, "5004 bytes"}},
		{"pane id too long", bridge.RegisterRequest{Name: "w", PaneID: strings.Repeat("p", 50_000)}, []string{"pane id", "50000 bytes", "128"}},
		{"pane id with an escape", bridge.RegisterRequest{Name: "w", PaneID: "p\x1b[31m"}, []string{"pane id", `\x1b`}},
		{"pane id with a space", bridge.RegisterRequest{Name: "w", PaneID: "p 1"}, []string{"pane id"}},
		{"pane id not UTF-8", bridge.RegisterRequest{Name: "w", PaneID: "p\xff"}, []string{"pane id", "UTF-8"}},
		{"33 groups", bridge.RegisterRequest{Name: "w", Groups: groups(33)}, []string{"33 groups", "32"}},
		{"5000 groups", bridge.RegisterRequest{Name: "w", Groups: groups(5000)}, []string{"5000 groups"}},
		{"group too long", bridge.RegisterRequest{Name: "w", Groups: []string{strings.Repeat("g", 1000)}}, []string{"group", "1000 bytes", "63"}},
	}
	for _, tc := range refused {
		wantRefused(t, tc.name, reg(tc.req), tc.want...)
	}
	if v, ok := h.view("w"); ok {
		t.Fatalf("a refused registration left an entity: %+v", v)
	}
	// at the limits: accepted, and a gid still names its own entity
	long := strings.Repeat("n", 64)
	if err := reg(bridge.RegisterRequest{Name: long, PaneID: strings.Repeat("p", 128), Groups: append(groups(32), "g0")}); err != nil {
		t.Fatalf("register at the limits: %v", err)
	}
	if e := h.mustResolve(a.GID); e.Name != "a" {
		t.Fatalf("Resolve(gid of a) = %s", e.Name)
	}
}

// An entity named like another's gid, left from before names were checked,
// makes that string ambiguous: remove --name <gid> resolves it, and must not
// take the wrong entity.
func TestLegacyGIDNameIsAmbiguous(t *testing.T) {
	h := newHarness(t, nil)
	a := h.reg("a", bridge.RolePrimary)
	if err := h.c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.st.PutEntity(store.Entity{GID: uuid.NewString(), Name: a.GID, Host: "h1", Role: "primary", Registered: time.Now()}); err != nil {
		t.Fatal(err)
	}
	h.start()
	_, err := h.c.Resolve(a.GID)
	wantRefused(t, "resolve a gid that is also a name", err, "ambiguous")
}

func TestBodyLimits(t *testing.T) {
	h := newHarness(t, nil)
	p, w := pair(h)
	ctx := context.Background()
	for _, body := range []string{"\x00", "\x00\x00\x01 \t\n", "\u200b\u200b", " \u00a0\u3000", "\x1b\x07\x7f"} {
		_, err := h.c.Send(ctx, p.GID, bridge.SendRequest{Target: "w", Message: body}, nil)
		wantRefused(t, fmt.Sprintf("send %q", body), err, "message is empty", "no visible text")
		_, err = h.c.Ask(ctx, w.GID, bridge.AskRequest{Target: "p", Question: body}, nil)
		wantRefused(t, fmt.Sprintf("ask %q", body), err, "empty")
		_, err = h.c.Broadcast(ctx, p.GID, bridge.BroadcastRequest{Message: body})
		wantRefused(t, fmt.Sprintf("broadcast %q", body), err, "empty")
	}
	_, err := h.c.Send(ctx, p.GID, bridge.SendRequest{Target: "w", Message: "ok \xff\xfe then"}, nil)
	wantRefused(t, "send invalid UTF-8", err, "not valid UTF-8", "offset 3")
	_, err = h.c.Broadcast(ctx, p.GID, bridge.BroadcastRequest{Message: "hi", Group: strings.Repeat("G", 100_000)})
	wantRefused(t, "broadcast to a huge group", err, "group", "100000 bytes")
	// text among control characters is text
	for _, body := range []string{"\x00a", "é", "🐑", "\tx\n"} {
		if _, err := h.c.Send(ctx, p.GID, bridge.SendRequest{Target: "w", Message: body}, nil); err != nil {
			t.Fatalf("send %q: %v", body, err)
		}
	}
}

func TestTargetLimits(t *testing.T) {
	h := newHarness(t, nil)
	p, _ := pair(h)
	ctx := context.Background()
	huge := strings.Repeat("\x1bZ", 300_000)
	_, err := h.c.Send(ctx, p.GID, bridge.SendRequest{Target: huge, Message: "m"}, nil)
	wantRefused(t, "send to a 600 KB target", err, "600000 bytes", "256", `"\x1bZ`)
	_, err = h.c.Poll(ctx, p.GID, bridge.PollRequest{Target: huge}, nil)
	wantRefused(t, "poll from a 600 KB target", err, "600000 bytes")
	_, err = h.c.Resolve(strings.Repeat("t", 257))
	wantRefused(t, "257-byte target", err, "257 bytes")
	// under the bound but unknown: echoed cut
	_, err = h.c.Resolve(strings.Repeat("u", 200))
	wantRefused(t, "unknown 200-byte target", err, "unknown target", "(200 bytes)")
	if strings.Contains(err.Error(), strings.Repeat("u", 65)) {
		t.Fatalf("echoes more than 64 bytes: %q", err)
	}
	_, err = h.c.Send(ctx, p.GID, bridge.SendRequest{Message: "m", TurnID: strings.Repeat("T", 10_000)}, nil)
	wantRefused(t, "answer a huge turn_id", err, "turn_id")
}
