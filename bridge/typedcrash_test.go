package bridge_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/embedded"
	"github.com/herdbridge/herdbridge/bridge/store"
)

// TestTypedBeforeCrashSettlesItsBrief: a gateway restarted after a crash in
// the middle of typing a brief reports it uncertain, and the brief's sender
// on this host is settled by that report at once — not by the report's
// delivery, which on a loaded machine could come after the sweeper's first
// overdue check and so also hear FAILED for a brief that was typed
// (TestForwardCrashWindow saw it once in 200 kills).
func TestTypedBeforeCrashSettlesItsBrief(t *testing.T) {
	dir := t.TempDir()
	tr, err := embedded.Open(filepath.Join(dir, "t.db"), embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	st, err := store.Open(filepath.Join(dir, "s.db"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := bridge.Config{Host: "h1", Transport: tr, Store: st, Injector: &busyInjector{}, MaxWait: 3 * time.Second,
		InjectWait: time.Second, ReceiptWait: time.Second, SweepEvery: 20 * time.Millisecond, PaneRecheck: time.Hour}
	first, err := bridge.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := first.Start(ctx); err != nil {
		t.Fatal(err)
	}
	lead, _, err := first.Register(ctx, bridge.RegisterRequest{Name: "lead", Role: bridge.RolePrimary})
	if err != nil {
		t.Fatal(err)
	}
	w, _, err := first.Register(ctx, bridge.RegisterRequest{Name: "w", Role: bridge.RoleWorker, PaneID: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	first.Close()

	// what the crash left: the brief's await on the sender's side, past its
	// deadline, and the typing record on the worker's
	msgID := uuid.NewString()
	rec := store.Await{MsgID: msgID, From: lead.GID, To: w.GID, ToName: "w", TraceID: uuid.NewString(), Excerpt: "the brief",
		Deadline: time.Now().Add(-time.Minute), ExpiresAt: time.Now().Add(time.Hour)}
	if err := st.PutAwait(rec); err != nil {
		t.Fatal(err)
	}
	if err := st.PutTyping(rec); err != nil {
		t.Fatal(err)
	}
	second, err := bridge.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if n := second.BriefsInFlight()[w.GID]; n != 0 {
		t.Fatalf("%d briefs still awaited after the restart reported the typed one", n)
	}
	if left, _ := st.LoadAwaits(); len(left) != 0 {
		t.Fatalf("awaits left in the store: %+v", left)
	}
	// past the overdue check's grace and many sweeps: the one report is the
	// uncertain INJECTED
	var got []bridge.Message
	deadline := time.Now().Add(2 * cfg.ReceiptWait)
	for time.Now().Before(deadline) {
		r, err := second.Poll(ctx, lead.GID, bridge.PollRequest{Wait: 200 * time.Millisecond}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r.Messages...)
	}
	if len(got) != 1 || got[0].Kind != bridge.KindInjected || got[0].Corr != msgID || !strings.HasPrefix(got[0].Body, bridge.StatusUncertain) {
		t.Fatalf("reports to the sender: %+v", got)
	}
}
