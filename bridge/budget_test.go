package bridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/herdbridge/herdbridge/bridge"
)

// budgetBytes is the result byte budget these tests run with: small, so a
// few dozen messages of a few KiB cross it many times.
const budgetBytes = 64 << 10

// encodedLen is what body takes inside a JSON string as encoding/json
// writes it: the oracle the budget is checked against.
func encodedLen(t *testing.T, body string) int {
	t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return len(raw) - 2 // the quotes
}

// budgetBodies are n bodies "tag-<i> " padded to about size bytes, every
// fifth of HTML characters (six bytes each in JSON), and one at index big
// larger than the whole budget.
func budgetBodies(n, size, big int) []string {
	out := make([]string, n)
	for i := range out {
		pad, sz := "x", size
		if i%5 == 4 {
			pad = "<&>"
		}
		if i == big {
			sz = budgetBytes + budgetBytes/2
		}
		tag := fmt.Sprintf("tag-%d ", i)
		out[i] = tag + strings.Repeat(pad, (sz-len(tag))/len(pad))
	}
	return out
}

// checkWithinBudget fails unless res carries one message, or messages whose
// bodies, encoded, fit in the budget.
func checkWithinBudget(t *testing.T, what string, res *bridge.Result) {
	t.Helper()
	total := 0
	for _, m := range res.Messages {
		total += encodedLen(t, m.Body)
	}
	if len(res.Messages) > 1 && total > budgetBytes {
		t.Fatalf("%s carries %d messages of %d encoded body bytes, over the %d-byte budget", what, len(res.Messages), total, budgetBytes)
	}
}

// A drain of a backlog many budgets big comes in several results, each
// within the byte budget (one message over it alone), each saying how many
// more are held and how to get them; drained to the end, every message
// came exactly once, in order. The held messages are in the store (spilled)
// and in memory both.
func TestPollResultStaysWithinByteBudget(t *testing.T) {
	h := newHarness(t, func(c *bridge.Config) { c.ResultMaxBytes = budgetBytes })
	p, w := pair(h)
	const n = 80
	bodies := budgetBodies(n, 6<<10, 37)
	for _, b := range bodies[:60] {
		h.send(w, bridge.SendRequest{Target: "p", Message: b})
	}
	h.heldFor("p", 60)
	spilled(h, p.GID)
	for _, b := range bodies[60:] {
		h.send(w, bridge.SendRequest{Target: "p", Message: b})
	}
	h.heldFor("p", n)

	var got []string
	for calls := 0; len(got) < n; calls++ {
		if calls > n {
			t.Fatalf("%d polls drained only %d of %d", calls, len(got), n)
		}
		res := h.poll(p, bridge.PollRequest{Max: 500})
		what := fmt.Sprintf("poll %d", calls+1)
		if len(res.Messages) == 0 {
			t.Fatalf("%s drained nothing with %d of %d still held", what, n-len(got), n)
		}
		checkWithinBudget(t, what, res)
		for _, m := range res.Messages {
			got = append(got, m.Body)
		}
		left := n - len(got)
		if res.More != left {
			t.Fatalf("%s says more=%d, but %d are still held", what, res.More, left)
		}
		if left > 0 && (res.Held == nil || res.Held.Total != left || !strings.Contains(res.Next, "bridge_poll")) {
			t.Fatalf("%s with %d left: held %+v, next %q: want the count and how to get them", what, left, res.Held, res.Next)
		}
		if left == 0 && (res.Next != "" || res.Held != nil) {
			t.Fatalf("last poll: next %q, held %+v: want neither", res.Next, res.Held)
		}
		if calls == 0 && len(res.Messages) == n {
			t.Fatalf("the first poll took all %d messages (%d bytes): no budget", n, n*6<<10)
		}
	}
	seen := map[string]int{}
	for i, b := range got {
		tag := strings.Fields(b)[0]
		seen[tag]++
		if b != bodies[i] {
			t.Fatalf("message %d is %.20q…, want %.20q…: order lost", i, b, bodies[i])
		}
	}
	if len(seen) != n {
		t.Fatalf("%d unique tags drained, want %d", len(seen), n)
	}
	if res := h.poll(p, bridge.PollRequest{}); res.Status != bridge.StatusEmpty {
		t.Fatalf("after the drain: %s with %d messages", res.Status, len(res.Messages))
	}
}

// A message bigger than the whole budget still comes: alone, at its turn.
func TestPollMessageOverBudgetComesAlone(t *testing.T) {
	h := newHarness(t, func(c *bridge.Config) { c.ResultMaxBytes = budgetBytes })
	p, w := pair(h)
	big := "big " + strings.Repeat("y", 2*budgetBytes)
	for _, b := range []string{"small 0", big, "small 1"} {
		h.send(w, bridge.SendRequest{Target: "p", Message: b})
	}
	h.heldFor("p", 3)
	var runs [][]string
	for range 3 {
		res := h.poll(p, bridge.PollRequest{Max: 500})
		runs = append(runs, bodies(res))
		if len(bodies(res)) == 0 || len(runs) == 3 {
			break
		}
	}
	if len(runs) < 3 || len(runs[0]) != 1 || len(runs[1]) != 1 || runs[1][0] != big || len(runs[2]) != 1 || runs[2][0] != "small 1" {
		var lens [][]int
		for _, r := range runs {
			var l []int
			for _, b := range r {
				l = append(l, len(b))
			}
			lens = append(lens, l)
		}
		t.Fatalf("results' body lengths %v: want [7] then the big one alone, then [7]", lens)
	}
}

// peek (and so the bridge://inbox resource) shows what a drain would take:
// within the budget, the count of the rest in more, nothing consumed.
func TestPeekStaysWithinByteBudget(t *testing.T) {
	h := newHarness(t, func(c *bridge.Config) { c.ResultMaxBytes = budgetBytes })
	p, w := pair(h)
	const n = 40
	for _, b := range budgetBodies(n, 6<<10, -1) {
		h.send(w, bridge.SendRequest{Target: "p", Message: b})
	}
	h.heldFor("p", n)
	res := h.poll(p, bridge.PollRequest{Peek: true, Max: 500})
	checkWithinBudget(t, "peek", res)
	if len(res.Messages) == 0 || len(res.Messages) == n || res.More != n-len(res.Messages) || !strings.Contains(res.Next, "bridge_poll") {
		t.Fatalf("peek shows %d of %d, more=%d next=%q: want a budget's worth and the count of the rest", len(res.Messages), n, res.More, res.Next)
	}
	if res.Held == nil || res.Held.Total != n {
		t.Fatalf("peek consumed something: held %+v, want %d", res.Held, n)
	}
}

// bridge_history returns the newest entries that fit in the budget, and
// says older ones match too.
func TestHistoryStaysWithinByteBudget(t *testing.T) {
	h, _ := historyHarness(t, true, nil)
	h.cfg.ResultMaxBytes = budgetBytes
	h.restart()
	p, w := pair(h)
	const n = 30
	sent := budgetBodies(n, 6<<10, -1)
	for _, b := range sent {
		h.send(w, bridge.SendRequest{Target: "p", Message: b})
	}
	h.drainN(p, n)
	v := h.history(p, bridge.HistoryRequest{Max: 500})
	total := 0
	for _, e := range v.Entries {
		total += encodedLen(t, e.Body)
	}
	if len(v.Entries) == 0 || total > budgetBytes || !v.More {
		t.Fatalf("history: %d entries of %d encoded bytes, more=%v: want the newest within %d bytes and more", len(v.Entries), total, v.More, budgetBytes)
	}
	if last := v.Entries[len(v.Entries)-1].Body; last != sent[n-1] {
		t.Fatalf("history's last entry is %.20q…, want the newest %.20q…", last, sent[n-1])
	}
}

// A result that was not delivered (its handover settled undelivered: the
// client went away) gives its messages back whole: the bodies a result let
// go of in memory are read from the store again, the ones never written
// are still there.
func TestUndeliveredResultComesBackWithBodies(t *testing.T) {
	h := newHarness(t, nil)
	p, w := pair(h)
	sent := budgetBodies(12, 4<<10, -1)
	for _, b := range sent[:8] {
		h.send(w, bridge.SendRequest{Target: "p", Message: b})
	}
	h.heldFor("p", 8)
	spilled(h, p.GID)
	for _, b := range sent[8:] { // held in memory too, not yet written
		h.send(w, bridge.SendRequest{Target: "p", Message: b})
	}
	h.heldFor("p", len(sent))

	ho := &bridge.Handover{}
	first, err := h.c.Poll(bridge.WithHandover(context.Background(), ho), p.GID, bridge.PollRequest{Max: 500}, nil)
	if err != nil || len(first.Messages) != len(sent) {
		t.Fatalf("first poll: %v, %d messages, want %d", err, len(first.Messages), len(sent))
	}
	ho.Settle(false)
	h.heldFor("p", len(sent))
	again := h.poll(p, bridge.PollRequest{Max: 500})
	if got := bodies(again); !slices.Equal(got, sent) {
		t.Fatalf("after an undelivered result the poll returned %d messages, first %.20q…: want all %d back whole and in order", len(got), got, len(sent))
	}
}
