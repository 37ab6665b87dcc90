package bridge_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/history"
)

// historyHarness is a harness keeping history in a temp dir (only for the
// entities registered with it on, unless all).
func historyHarness(t *testing.T, all bool, mod func(*bridge.HistoryConfig)) (*harness, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "history")
	h := newHarness(t, func(c *bridge.Config) {
		c.History = bridge.HistoryConfig{Dir: dir, All: all}
		if mod != nil {
			mod(&c.History)
		}
	})
	return h, dir
}

func (h *harness) regHistory(name string, role bridge.Role) bridge.Entity {
	h.t.Helper()
	on := true
	e, _, err := h.c.Register(context.Background(), bridge.RegisterRequest{Name: name, Role: role, History: &on})
	if err != nil {
		h.t.Fatalf("Register %s: %v", name, err)
	}
	return e
}

func (h *harness) history(who bridge.Entity, req bridge.HistoryRequest) *bridge.HistoryView {
	h.t.Helper()
	r, err := h.c.History(context.Background(), who.GID, req)
	if err != nil {
		h.t.Fatalf("history of %s: %v", who.Name, err)
	}
	return r.History
}

// drainN polls who until n messages came.
func (h *harness) drainN(who bridge.Entity, n int) []bridge.Message {
	h.t.Helper()
	var got []bridge.Message
	deadline := time.Now().Add(bound)
	for len(got) < n && time.Now().Before(deadline) {
		got = append(got, h.poll(who, bridge.PollRequest{Wait: time.Second, Max: 500}).Messages...)
	}
	if len(got) != n {
		h.t.Fatalf("%s drained %d messages, want %d", who.Name, len(got), n)
	}
	return got
}

// TestHistoryExchange: 100 messages exchanged between a primary with
// history on and a worker; once all were drained, bridge_history(target)
// returns them in order, again and again (nothing is consumed); it
// survives a restart; purge empties it; the file is 0600.
func TestHistoryExchange(t *testing.T) {
	h, dir := historyHarness(t, false, nil)
	lead := h.regHistory("lead", bridge.RolePrimary)
	w := h.reg("w", bridge.RoleWorker)
	var want []string
	for i := range 50 {
		brief, reply := fmt.Sprintf("brief %d", i), fmt.Sprintf("reply %d", i)
		h.send(lead, bridge.SendRequest{Target: "w", Message: brief})
		if got := h.drainN(w, 1); got[0].Body != brief {
			t.Fatalf("worker got %q, want %q", got[0].Body, brief)
		}
		h.send(w, bridge.SendRequest{Target: "lead", Message: reply})
		if got := h.drainN(lead, 1); got[0].Body != reply {
			t.Fatalf("lead got %q, want %q", got[0].Body, reply)
		}
		want = append(want, "out "+brief, "in "+reply)
	}
	check := func(what string) {
		t.Helper()
		v := h.history(lead, bridge.HistoryRequest{Target: "w", Max: 500})
		var got []string
		for _, e := range v.Entries {
			got = append(got, e.Dir+" "+e.Body)
		}
		if strings.Join(got, "|") != strings.Join(want, "|") || v.More || v.Skipped != 0 {
			t.Fatalf("%s: history of %d entries (more %v, skipped %d), want the 100 exchanged in order; got %q", what, len(got), v.More, v.Skipped, got)
		}
	}
	check("after draining")
	check("read again")
	if r := h.poll(lead, bridge.PollRequest{}); len(r.Messages) != 0 {
		t.Fatalf("reading the history held messages again: %+v", r.Messages)
	}
	if v := h.history(lead, bridge.HistoryRequest{Query: "REPLY 7"}); len(v.Entries) != 1 || v.Entries[0].Body != "reply 7" || v.Entries[0].FromName != "w" {
		t.Fatalf("query: %+v", v.Entries)
	}
	if v := h.history(lead, bridge.HistoryRequest{Max: 10}); len(v.Entries) != 10 || !v.More || v.Entries[9].Body != "reply 49" {
		t.Fatalf("max 10: %d entries, more %v", len(v.Entries), v.More)
	}
	if v := h.history(lead, bridge.HistoryRequest{Since: time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}); len(v.Entries) != 0 {
		t.Fatalf("since the future: %d entries", len(v.Entries))
	}
	fi, err := os.Stat(filepath.Join(dir, "lead.jsonl"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("history file: %v, mode %v, want 0600", err, fi.Mode().Perm())
	}
	if _, err := os.Stat(filepath.Join(dir, "w.jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the worker's history was kept though it is off: %v", err)
	}
	if _, err := h.c.History(context.Background(), w.GID, bridge.HistoryRequest{}); err == nil || !strings.Contains(err.Error(), "history is off for w") {
		t.Fatalf("history of an entity without it: %v", err)
	}

	h.restart()
	check("after a restart")
	if n, err := h.c.PurgeHistory("lead"); err != nil || n != 1 {
		t.Fatalf("purge: %d files, %v", n, err)
	}
	if v := h.history(lead, bridge.HistoryRequest{}); len(v.Entries) != 0 {
		t.Fatalf("history after purge: %d entries", len(v.Entries))
	}
}

// TestHistoryTornLine: a last line torn by a crash is skipped with a
// count, not a failure; the next write cuts it and starts a line of its own.
func TestHistoryTornLine(t *testing.T) {
	h, dir := historyHarness(t, true, nil)
	lead, w := h.reg("lead", bridge.RolePrimary), h.reg("w", bridge.RoleWorker)
	h.send(lead, bridge.SendRequest{Target: "w", Message: "one"})
	h.send(lead, bridge.SendRequest{Target: "w", Message: "two"})
	if v := h.history(lead, bridge.HistoryRequest{}); len(v.Entries) != 2 {
		t.Fatalf("%d entries, want 2", len(v.Entries))
	}
	if err := h.c.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "lead.jsonl"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(`{"ts":"2026-01-01T00:00:00Z","dir":"out","kind":"SEND","msgId":"x","bo`) // a crash mid-line
	f.Close()
	h.start()
	v := h.history(lead, bridge.HistoryRequest{})
	if len(v.Entries) != 2 || v.Skipped != 1 {
		t.Fatalf("torn file: %d entries, %d skipped; want 2 and 1", len(v.Entries), v.Skipped)
	}
	h.send(lead, bridge.SendRequest{Target: "w", Message: "three"})
	h.history(lead, bridge.HistoryRequest{}) // written: the file is quiet now
	// the same message kept twice (a delivery again after a restart) is one entry
	raw, err := os.ReadFile(filepath.Join(dir, "lead.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(raw), "\n")
	if err := os.WriteFile(filepath.Join(dir, "lead.jsonl"), []byte(string(raw)+lines[0]), 0o600); err != nil {
		t.Fatal(err)
	}
	v = h.history(lead, bridge.HistoryRequest{})
	if len(v.Entries) != 3 || v.Skipped != 0 || v.Entries[2].Body != "three" {
		t.Fatalf("after the next write: %d entries, %d skipped", len(v.Entries), v.Skipped)
	}
	_ = w
}

// TestHistoryCaps: past maxBytes the oldest entries go; past maxAge
// entries are not returned, and go at the next write.
func TestHistoryCaps(t *testing.T) {
	h, dir := historyHarness(t, true, func(c *bridge.HistoryConfig) { c.MaxBytes, c.MaxAge = 8<<10, time.Hour })
	lead, _ := h.reg("lead", bridge.RolePrimary), h.reg("w", bridge.RoleWorker)
	body := strings.Repeat("x", 300)
	for i := range 100 {
		h.send(lead, bridge.SendRequest{Target: "w", Message: fmt.Sprintf("%03d %s", i, body)})
	}
	v := h.history(lead, bridge.HistoryRequest{Max: 500})
	if len(v.Entries) == 0 || len(v.Entries) >= 100 || !strings.HasPrefix(v.Entries[len(v.Entries)-1].Body, "099 ") {
		t.Fatalf("capped history: %d entries", len(v.Entries))
	}
	if fi, err := os.Stat(filepath.Join(dir, "lead.jsonl")); err != nil || fi.Size() > 8<<10 {
		t.Fatalf("history file over maxBytes: %v %d", err, fi.Size())
	}
	h.clk.Advance(2 * time.Hour)
	if v := h.history(lead, bridge.HistoryRequest{}); len(v.Entries) != 0 {
		t.Fatalf("%d entries past maxAge returned", len(v.Entries))
	}
	h.send(lead, bridge.SendRequest{Target: "w", Message: "fresh"})
	v = h.history(lead, bridge.HistoryRequest{})
	if len(v.Entries) != 1 || v.Entries[0].Body != "fresh" {
		t.Fatalf("after the age cap: %+v", v.Entries)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "lead.jsonl"))
	if es, _ := history.Parse(raw); len(es) != 1 {
		t.Fatalf("the file still holds %d entries past maxAge", len(es))
	}
}
