package bridge_test

// The crash windows of an idempotent call (bridge/requestintent.go): the
// intent recorded but the publish not done, and the publish done but the
// record saying so not written. A retry after a restart publishes the same
// message again — same msgId — and its receiver holds it once.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/embedded"
	"github.com/herdbridge/herdbridge/bridge/store"
)

// gatedStoreHarness is storeHarness on a gated transport.
func gatedStoreHarness(t *testing.T) (*harness, *gatedTransport) {
	var gt *gatedTransport
	h := storeHarness(t, t.TempDir(), func(cfg *bridge.Config) {
		gt = &gatedTransport{Transport: cfg.Transport.(*embedded.Transport), arrived: make(chan struct{}, 4)}
		cfg.Transport = gt
	})
	return h, gt
}

// heldOnceAs drains w and checks it got exactly one message, msgId id,
// once the transport holds nothing more for it (a second copy would have
// been consumed by then: held, or dropped as already seen).
func heldOnceAs(t *testing.T, h *harness, w bridge.Entity, id string) {
	t.Helper()
	var got []bridge.Message
	eventually(t, "w got its brief and the transport holds nothing more", func() bool {
		got = append(got, h.poll(w, bridge.PollRequest{Max: 10}).Messages...)
		total := 0
		for _, n := range h.tr.Depths() {
			total += n
		}
		return len(got) > 0 && total == 0
	})
	got = append(got, h.poll(w, bridge.PollRequest{Max: 10}).Messages...)
	if len(got) != 1 || got[0].MsgID != id {
		t.Fatalf("w got %+v, want the one brief %s", got, id)
	}
}

// TestRequestIDIntentResumedAfterFailedPublish: the intent is recorded, the
// publish fails; after a restart the retry publishes under the intent's
// msgId.
func TestRequestIDIntentResumedAfterFailedPublish(t *testing.T) {
	h, gt := gatedStoreHarness(t)
	p, w := pair(h)
	gate := make(chan error, 1)
	gate <- errors.New("broker unreachable")
	gt.setGate(gate)
	req := bridge.SendRequest{Target: "w", Message: "brief", RequestID: "intent-1"}
	if _, err := h.c.Send(context.Background(), p.GID, req, nil); err == nil {
		t.Fatal("the gated publish did not fail")
	}
	<-gt.arrived
	gt.setGate(nil)
	intent, ok, err := h.st.GetRequest(p.GID, "intent-1")
	if err != nil || !ok || !intent.Publishing || intent.MsgID == "" {
		t.Fatalf("stored intent %+v, %v, %v: want a publishing record with a msgId", intent, ok, err)
	}
	h.reopen()
	res := h.send(p, req)
	if res.MsgID != intent.MsgID || res.TraceID != intent.TraceID || res.Status != bridge.StatusConfirmed {
		t.Fatalf("retry %+v, want confirmed under the intent's msgId %s", res, intent.MsgID)
	}
	heldOnceAs(t, h, w, intent.MsgID)
	if rec, _, _ := h.st.GetRequest(p.GID, "intent-1"); rec.Publishing || rec.Status != bridge.StatusConfirmed {
		t.Fatalf("record after the retry %+v, want published and confirmed", rec)
	}
}

// TestRequestIDIntentStandsWhenRecordFails: the disk fills between the
// intent and the record of the publish; the send answered confirmed. After
// the disk is freed and the gateway restarted, a retry sends the same
// msgId again and the worker holds it once.
func TestRequestIDIntentStandsWhenRecordFails(t *testing.T) {
	h, gt := gatedStoreHarness(t)
	p, w := pair(h)
	gate := make(chan error, 1)
	gt.setGate(gate)
	req := bridge.SendRequest{Target: "w", Message: "brief", RequestID: "intent-2"}
	out := async(func() (*bridge.Result, error) { return h.c.Send(context.Background(), p.GID, req, nil) })
	<-gt.arrived // the intent is recorded: the publish waits at the gate
	h.st.SetDiskFull(true)
	gate <- nil
	first := <-out
	if first.err != nil || first.res.Status != bridge.StatusConfirmed {
		t.Fatalf("send: %+v, %v", first.res, first.err)
	}
	h.st.SetDiskFull(false)
	gt.setGate(nil)
	h.reopen()
	res := h.send(p, req)
	if res.MsgID != first.res.MsgID {
		t.Fatalf("retry %+v, want the same msgId %s", res, first.res.MsgID)
	}
	heldOnceAs(t, h, w, first.res.MsgID)
}

// TestRequestIDIntentAskKeepsItsTurn: an ask was published and answered,
// but its record still says publishing (the write after the publish was
// lost). The retry after a restart asks again under the same msgId and
// turn — and keeps the turn the restart restored, with its answer, instead
// of opening a fresh one that nothing would answer (the receiver drops
// the repeated ASK as already seen).
func TestRequestIDIntentAskKeepsItsTurn(t *testing.T) {
	h := storeHarness(t, t.TempDir(), nil)
	p, w := pair(h)
	req := bridge.AskRequest{Question: "which db?", Target: "p", RequestID: "ask-r", Wait: 3 * time.Second}
	pl := async(func() (*bridge.Result, error) {
		return h.c.Poll(context.Background(), p.GID, bridge.PollRequest{Wait: 3 * time.Second}, nil)
	})
	h.waitingOn(p.Name)
	ask := async(func() (*bridge.Result, error) { return h.c.Ask(context.Background(), w.GID, req, nil) })
	got := awaitOK(t, "poll for the ask", pl)
	if len(got.Messages) != 1 || got.TurnID == "" {
		t.Fatalf("poll: %+v", got)
	}
	wantStatus(t, "answer", h.answer(p, got.TurnID, "postgres"), bridge.StatusDelivered)
	first := awaitOK(t, "ask", ask)
	wantStatus(t, "ask", first, bridge.StatusAnswered)
	// the record of the publish lost: only the intent stands
	h.reopenAfter(func(st *store.Store) {
		rec, ok, err := st.GetRequest(w.GID, "ask-r")
		if err != nil || !ok {
			t.Fatalf("record: %v %v", ok, err)
		}
		rec.Publishing, rec.Status = true, ""
		if err := st.PutRequest(rec); err != nil {
			t.Fatal(err)
		}
	})
	again, err := h.c.Ask(context.Background(), w.GID, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if again.MsgID != first.MsgID || again.TurnID != first.TurnID || again.Status != bridge.StatusAnswered {
		t.Fatalf("retry %+v, want answered in turn %s under msgId %s", again, first.TurnID, first.MsgID)
	}
}
