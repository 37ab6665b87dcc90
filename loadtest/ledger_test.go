package loadtest

import (
	"errors"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

func result(status, msgID string) Result {
	return Result{Result: bridge.Result{Status: status, MsgID: msgID}}
}

// TestLedgerAccounts: the ledger tells delivered, lost, explained, expected
// and unexpected duplicates, and refusals apart, by tag and kill marks
// alone.
func TestLedgerAccounts(t *testing.T) {
	clock := NewClock()
	l := NewLedger(clock)
	const a, b = "ha", "hb"

	ok := l.Begin(KindBrief, "p@ha", a, []string{"w@hb"})
	l.End(ok, a, result("confirmed", "m1"), nil)
	l.Delivered(ok.Tag, "w@hb", b)

	lost := l.Begin(KindReply, "w@hb", b, []string{"p@ha"})
	l.End(lost, b, result("confirmed", "m2"), nil)

	failed := l.Begin(KindPaneBrief, "p@ha", a, []string{"x@hb"})
	l.End(failed, a, result("queued", "m3"), nil)
	l.Receipt("m3", "FAILED", "pane closed")

	refused := l.Begin(KindBrief, "p@ha", a, []string{"w@hb"})
	l.End(refused, a, Result{IsError: true, Text: "unknown target"}, nil)
	errored := l.Begin(KindBrief, "p@ha", a, []string{"w@hb"})
	l.End(errored, a, Result{}, errors.New("connection reset"))

	// a copy before and one after a kill of the recipient's gateway: the
	// documented redelivery; two copies with no kill between: a bug
	redelivered := l.Begin(KindReply, "w@hb", b, []string{"p@ha"})
	l.End(redelivered, b, result("confirmed", "m4"), nil)
	twice := l.Begin(KindReply, "w@hb", b, []string{"p@ha"})
	l.End(twice, b, result("confirmed", "m5"), nil)
	l.Delivered(redelivered.Tag, "p@ha", a)
	l.Delivered(twice.Tag, "p@ha", a)
	l.Delivered(twice.Tag, "p@ha", a)
	clock.Killing(a)
	clock.Killed(a)
	l.Delivered(redelivered.Tag, "p@ha", a)

	// a pane forward is at-most-once: a kill between copies excuses nothing
	typedTwice := l.Begin(KindPaneBrief, "p@ha", a, []string{"x@hb"})
	l.End(typedTwice, a, result("submitted", "m6"), nil)
	l.Delivered(typedTwice.Tag, "x@hb", b)
	clock.Killing(b)
	clock.Killed(b)
	l.Delivered(typedTwice.Tag, "x@hb", b)

	// a broadcast owes one copy per recipient
	bc := l.Begin(KindBroadcast, "p@ha", a, []string{"w1@ha", "w2@hb"})
	l.End(bc, a, result("confirmed", "m7"), nil)
	l.Delivered(bc.Tag, "w1@ha", a)

	if copies, open := l.Outstanding(); copies != 2 || open != 0 {
		t.Fatalf("outstanding %d copies, %d open; want 2 (the lost reply, the broadcast's second copy), 0", copies, open)
	}
	sum := l.Summarize()
	kinds, total, lostList, dups, errs := sum.Kinds, sum.Total, sum.Lost, sum.Dups, sum.Errors
	by := map[Kind]KindFigures{}
	for _, k := range kinds {
		by[k.Kind] = k
	}
	if total.Lost != 2 || len(lostList) != 2 {
		t.Errorf("lost %d (%v), want 2", total.Lost, lostList)
	}
	if total.Explained != 1 || by[KindPaneBrief].Explained != 1 {
		t.Errorf("explained %d, want the FAILED pane brief", total.Explained)
	}
	if total.ExpectedDuplicates != 1 || by[KindReply].ExpectedDuplicates != 1 {
		t.Errorf("expected duplicates %d, want 1 (the reply redelivered across the kill)", total.ExpectedDuplicates)
	}
	if total.UnexpectedDuplicates != 2 || len(dups) != 2 {
		t.Errorf("unexpected duplicates %d (%v), want 2 (the reply twice, the pane brief typed twice)", total.UnexpectedDuplicates, dups)
	}
	if b := by[KindBrief]; b.Sent != 3 || b.Accepted != 1 || b.Copies != 1 || b.Delivered != 1 || len(b.NotAccepted) != 2 || len(errs) != 2 {
		t.Errorf("briefs: %+v, errors %v", b, errs)
	}
	if bc := by[KindBroadcast]; bc.Copies != 2 || bc.Delivered != 1 || bc.Lost != 1 {
		t.Errorf("broadcast: %+v", bc)
	}
}

// TestStraddledSendMayRepeat: a send whose call a kill of its own gateway
// cut may be published again by its retry (the one-state-write window):
// its second copy is expected, even with no kill of the recipient's.
func TestStraddledSendMayRepeat(t *testing.T) {
	clock := NewClock()
	l := NewLedger(clock)
	s := l.Begin(KindReply, "w@hb", "hb", []string{"p@ha"})
	clock.Killing("hb")
	clock.Killed("hb")
	l.End(s, "hb", result("confirmed", "m1"), nil)
	l.Delivered(s.Tag, "p@ha", "ha")
	l.Delivered(s.Tag, "p@ha", "ha")
	total := l.Summarize().Total
	if !s.Straddled || total.ExpectedDuplicates != 1 || total.UnexpectedDuplicates != 0 {
		t.Fatalf("straddled %v, total %+v", s.Straddled, total)
	}
}

func TestTagAndReplyTo(t *testing.T) {
	b := body(KindPaneBrief, "sk-0000042", "lead@ha")
	prompt := "[herdbridge] brief from lead@ha (msgId 1234):\n" + b + "\nreply with bridge_send"
	if TagOf(prompt) != "sk-0000042" || replyToOf(prompt) != "lead@ha" {
		t.Fatalf("tag %q reply-to %q in %q", TagOf(prompt), replyToOf(prompt), prompt)
	}
	if TagOf("FAILED: brief \"soak\" expired") != "" {
		t.Fatal("a tag found where none is")
	}
}

func TestFlatness(t *testing.T) {
	var s []Sample
	for i := 0; i < 100; i++ {
		rss := 40.0
		if i >= 90 {
			rss = 46 // +15% in the last tenth
		}
		s = append(s, Sample{AtS: float64(i), Host: "h", Up: true, RSSMiB: rss, Goroutines: 100 + i%3})
	}
	s = append(s, Sample{AtS: 95, Host: "h"}) // down: left out
	f := flatness(s, []string{"h"}, 100_000_000_000)
	if len(f) != 2 || f[0].OK || f[0].Second != 40 || f[0].Last != 46 || !f[1].OK {
		t.Fatalf("flatness %+v", f)
	}
}

// TestPlainCalls: polls and roster reads owe nothing; their calls and
// failures count, a failed receiving poll counts as a failure, and the
// percentiles are nearest rank.
func TestPlainCalls(t *testing.T) {
	l := NewLedger(NewClock())
	for range 9 {
		l.Call(KindPoll, time.Now(), Result{}, nil)
	}
	l.Call(KindPoll, time.Now(), Result{IsError: true, Text: "unknown target"}, nil)
	l.ReceiveFailed("w@h", Result{}, errors.New("connection refused"))
	sum := l.Summarize()
	var poll *KindFigures
	for i, k := range sum.Kinds {
		if k.Kind == KindRoster {
			t.Errorf("a roster row with no roster call measured: %+v", k)
		}
		if k.Kind == KindPoll {
			poll = &sum.Kinds[i]
		}
	}
	if poll == nil || poll.Sent != 10 || poll.Accepted != 9 || poll.NotAccepted["error"] != 1 || poll.Copies != 0 || poll.CarriesMessages() {
		t.Fatalf("poll figures %+v", poll)
	}
	if sum.ReceiveFailed != 1 || len(sum.Errors) != 2 {
		t.Fatalf("receive failures %d, errors %v", sum.ReceiveFailed, sum.Errors)
	}
	if calls, failed := l.Progress(); calls != 10 || failed != 2 {
		t.Fatalf("progress %d calls %d failed, want 10 and 2", calls, failed)
	}
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if p50, p90, p99 := percentiles(ds); p50 != 50 || p90 != 90 || p99 != 99 {
		t.Fatalf("percentiles %v %v %v, want 50 90 99", p50, p90, p99)
	}
}
