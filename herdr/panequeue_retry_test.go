package herdr_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// Own-draft recovery's retry rule and the large-brief files' lifecycle
// (issue 20), on the real core and Injector and the fake herdr.

func newFates() *fates { return &fates{tag: map[string]string{}, told: map[string][]string{}} }

// send sends body (which starts with its tag) to w and records the send's
// own result.
func (r *paneRig) send(t *testing.T, f *fates, tag, rest string) string {
	t.Helper()
	res, err := r.core.Send(context.Background(), r.lead, bridge.SendRequest{Target: "w", Message: tag + " " + rest}, nil)
	if err != nil || res.MsgID == "" {
		t.Fatalf("send %s: %+v %v", tag, res, err)
	}
	f.mu.Lock()
	f.tag[res.MsgID] = tag
	f.mu.Unlock()
	f.sendResult(res, err)
	return res.MsgID
}

// until drains the sender's receipts into f until cond holds.
func (r *paneRig) until(t *testing.T, f *fates, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		f.mu.Lock()
		ok := cond()
		f.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			f.mu.Lock()
			defer f.mu.Unlock()
			t.Fatalf("%s: not within %v; told %q", what, within, f.told)
		}
		res, err := r.core.Poll(context.Background(), r.lead, bridge.PollRequest{Wait: 50 * time.Millisecond, Max: 100}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range res.Messages {
			f.receipt(m)
		}
	}
}

// requestsOf counts the fake's requests of method.
func (r *paneRig) requestsOf(method string) int {
	return strings.Count(strings.Join(r.fake.Requests(), "\n"), `"method":"`+method+`"`)
}

// TestOwnDraftEnterRetriesThenFailed: a brief whose every Enter is
// swallowed gets exactly three more Enters, spaced, never a second paste;
// then its sender hears a late FAILED (corr = its msgId) saying its text
// was left in the composer and why. The brief behind it is never typed
// over that text: it is FAILED after ownDraftWait. Once someone clears the
// composer, the next brief is typed.
func TestOwnDraftEnterRetriesThenFailed(t *testing.T) {
	r := newPaneRig(t, nil)
	f := newFates()
	r.fake.SwallowEnters(r.pane, 1000)
	first := r.send(t, f, "tag-first", "never submitted")
	uncertainAt := time.Now()
	if got := f.told[first]; len(got) != 1 || got[0] != bridge.StatusUncertain {
		t.Fatalf("first send told %q, want uncertain", got)
	}
	second := r.send(t, f, "tag-second", "waits behind")
	sentSecond := time.Now()
	r.until(t, f, 10*time.Second, "the first brief's late FAILED", func() bool { return len(f.told[first]) == 2 })
	failedAt := time.Now()
	late := f.told[first][1]
	for _, want := range []string{"late failed: ", "never submitted", "5 Enter presses", "left in the composer", "herdr has no way to clear a composer"} {
		if !strings.Contains(late, want) {
			t.Errorf("late FAILED %q lacks %q", late, want)
		}
	}
	if keys := r.requestsOf("agent.send_keys"); keys != 4 { // typing's retry, then recovery's three
		t.Errorf("%d Enter presses through agent.send_keys, want 4", keys)
	}
	if gap := failedAt.Sub(uncertainAt); gap < 3*2*rigRecheck {
		t.Errorf("three Enters spaced 2·PaneRecheck took only %v", gap)
	}
	r.until(t, f, 10*time.Second, "the second brief's FAILED", func() bool { return len(f.told[second]) > 0 })
	if got := f.told[second]; len(got) != 1 || !strings.HasPrefix(got[0], "failed: ") || !strings.Contains(got[0], "never typed over a draft") {
		t.Errorf("second brief told %q", got)
	}
	if waited := time.Since(sentSecond); waited < 3*2*rigRecheck {
		t.Errorf("the brief behind our leftover was FAILED after %v, before ownDraftWait", waited)
	}
	if n := writesWith(r, "tag-first"); n != 1 {
		t.Errorf("first brief written %d times", n)
	}
	if n := writesWith(r, "tag-second"); n != 0 {
		t.Errorf("second brief written %d times over our leftover", n)
	}
	if c := r.fake.Composer(r.pane); !strings.Contains(c, "tag-first") {
		t.Errorf("composer %q: our leftover was touched", c)
	}
	// someone clears the composer: the queue types again
	r.fake.SwallowEnters(r.pane, 0)
	r.fake.SetDraft(r.pane, "")
	third := r.send(t, f, "tag-third", "after the clear")
	if got := f.told[third]; len(got) != 1 || got[0] != bridge.StatusSubmitted {
		t.Errorf("third brief told %q, want submitted", got)
	}
	if subs := r.fake.Submitted(r.pane); len(subs) != 1 || !strings.Contains(subs[0], "tag-third") {
		t.Errorf("turns %q", subs)
	}
}

// writesWith counts the PTY writes into r's pane carrying text.
func writesWith(r *paneRig, text string) int {
	n := 0
	for _, w := range r.fake.Writes(r.pane) {
		n += strings.Count(string(w), text)
	}
	return n
}

// briefFiles lists the msgIds with a file in r's brief directory.
func (r *paneRig) briefFiles(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(r.briefDir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".md"))
	}
	return out
}

// waitFiles waits until r's brief directory holds exactly want (sorted).
func (r *paneRig) waitFiles(t *testing.T, what string, want ...string) {
	t.Helper()
	slices.Sort(want)
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := r.briefFiles(t)
		slices.Sort(got)
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: brief files %v, want %v", what, got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// large is a brief body over the rig's 200-byte inline limit.
func large(tag string) string { return strings.Repeat("a large brief's line of text. ", 10) + tag }

// TestLargeBriefFileLifecycle: a large brief's file stays while its brief
// is the pane's last typed (the agent reads it during the turn), goes when
// the next brief is typed, goes at once when a queued brief fails (its
// worker removed), and the last typed one goes once its worker is gone.
func TestLargeBriefFileLifecycle(t *testing.T) {
	r := newPaneRig(t, nil)
	f := newFates()
	big := r.send(t, f, "tag-big", large("one"))
	r.waitFiles(t, "the typed large brief is kept for its turn", big)
	b, err := os.ReadFile(filepath.Join(r.briefDir, big+".md"))
	if err != nil || !strings.Contains(string(b), "tag-big") {
		t.Fatalf("brief file %q (%v)", b, err)
	}
	r.until(t, f, 5*time.Second, "the agent idle again", func() bool { return r.fake.Status(r.pane) != "working" })
	big2 := r.send(t, f, "tag-big2", large("two"))
	r.waitFiles(t, "the next typed brief replaces it", big2)
	r.send(t, f, "tag-small", "inline")
	r.waitFiles(t, "an inline brief typed next ends the large one's turn")

	r.fake.SetStatus(r.pane, "working") // the next one waits in the queue, its file written by the first look
	queued := r.send(t, f, "tag-queued", large("three"))
	r.waitFiles(t, "a queued large brief keeps its file", queued)
	if err := r.core.Remove(context.Background(), r.w); err != nil {
		t.Fatal(err)
	}
	r.until(t, f, 5*time.Second, "the queued brief FAILED", func() bool { return len(f.told[queued]) > 0 })
	if got := f.told[queued]; !strings.HasPrefix(got[0], "failed: ") {
		t.Fatalf("queued brief told %q", got)
	}
	r.waitFiles(t, "a brief that failed in the queue loses its file")
}

// TestLargeBriefFileOfRemovedWorker: the last large brief typed into a
// pane is deleted by the sweep once its worker is removed.
func TestLargeBriefFileOfRemovedWorker(t *testing.T) {
	r := newPaneRig(t, nil)
	f := newFates()
	big := r.send(t, f, "tag-big", large("one"))
	r.waitFiles(t, "typed", big)
	if err := r.core.Remove(context.Background(), r.w); err != nil {
		t.Fatal(err)
	}
	r.waitFiles(t, "the sweep after the worker's removal")
}

// TestLargeBriefOrphansRemovedAtStart: a start deletes the files no queued
// or awaited brief refers to (a crash's leftovers), and keeps the file of
// a brief still queued, which is then typed.
func TestLargeBriefOrphansRemovedAtStart(t *testing.T) {
	r := newPaneRig(t, func(c *bridge.Config) { c.PaneRecheck = time.Hour }) // only the start's sweep runs
	f := newFates()
	r.fake.SetStatus(r.pane, "working")
	queued := r.send(t, f, "tag-queued", large("queued"))
	r.waitFiles(t, "queued", queued)
	orphan := "0b3c0000-0000-4000-8000-00000000dead"
	if err := os.WriteFile(filepath.Join(r.briefDir, orphan+".md"), []byte("left by a crash"), 0o600); err != nil {
		t.Fatal(err)
	}
	r.restart(t)
	r.waitFiles(t, "after the restart", queued)
	r.fake.SetStatus(r.pane, "idle")
	r.core.PaneStatus(r.pane, "idle")
	r.until(t, f, 5*time.Second, "the queued brief typed after the restart", func() bool { return len(f.told[queued]) > 0 })
	if got := f.told[queued]; !strings.HasPrefix(got[0], bridge.StatusSubmitted) {
		t.Fatalf("queued brief told %q", got)
	}
}
