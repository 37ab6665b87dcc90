package loadtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/herdr/herdrtest"
	"github.com/herdbridge/herdbridge/loadtest"
)

// TestEngineOnOneGateway: the engine against one in-process gateway (the
// embedded transport, a fake herdr), every agent kind over its real
// transport, a few seconds of traffic: every kind flows, and every
// accepted message is delivered exactly once.
func TestEngineOnOneGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("builds herdbridge for the stdio relay")
	}
	bin := buildBinary(t)
	fake := herdrtest.New(t, herdrtest.WithSubmitDelay(10*time.Millisecond), herdrtest.WithTurnDuration(20*time.Millisecond))
	g := gatewaytest.Start(t, gatewaytest.HerdrConfig(t, fake))
	tg := loadtest.Target{Host: g.Host(), StateDir: g.StateDir(), HerdrSocket: fake.SocketPath()}
	eng := loadtest.New(loadtest.Config{Bin: bin, Targets: []loadtest.Target{tg}, Primaries: 2, PullWorkers: 2, PaneWorkers: 2,
		Panes: fakePanes{tg.Host: fake}, ActEvery: 100 * time.Millisecond, AskEvery: 400 * time.Millisecond})
	ctx := context.Background()
	if err := eng.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	smp := loadtest.NewSampler([]loadtest.Target{tg}, time.Second)
	eng.Run(ctx, 8*time.Second)
	drain := eng.Drain(ctx, time.Minute)
	rep := smp.Report(eng, 8*time.Second, drain, "test")
	for _, k := range rep.Kinds {
		t.Logf("%s: sent %d, accepted %d, copies %d, delivered %d, lost %d, dups %d/%d, statuses %v", k.Kind, k.Sent, k.Accepted, k.Copies, k.Delivered, k.Lost, k.ExpectedDuplicates, k.UnexpectedDuplicates, k.Statuses)
		if k.CarriesMessages() && (k.Accepted == 0 || k.Delivered == 0) && !(k.Kind == loadtest.KindAnswer && askedNone(rep)) {
			t.Errorf("no %s accepted and delivered", k.Kind)
		}
	}
	for _, k := range rep.Kinds {
		if k.Kind == loadtest.KindPoll && (k.Sent == 0 || k.Accepted != k.Sent) {
			t.Errorf("filtered polls: %+v", k)
		}
	}
	if !rep.AccountingOK || rep.Total.ExpectedDuplicates != 0 {
		t.Fatalf("accounting: %v; lost %v; duplicated %v; %d expected duplicates with no kill", rep.Failures, rep.LostDetail, rep.DupDetail, rep.Total.ExpectedDuplicates)
	}
}

// askedNone: no ask was answered (each found its primary between two
// polls: no_waiter), so no answer was owed — unlikely, but a short run on
// a loaded machine must not fail for it.
func askedNone(rep *loadtest.Report) bool {
	for _, k := range rep.Kinds {
		if k.Kind == loadtest.KindAsk {
			return k.Statuses["answered"] == 0
		}
	}
	return true
}
