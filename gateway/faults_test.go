package gateway_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker/brokertest"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

func rmqctl(t testing.TB, args ...string) { brokertest.Ctl(t, args...) }

// TestBrokerRestartLosesNothingConfirmed: 10k replies sent across hosts
// while the broker application is stopped and started: every send the
// gateway confirmed arrives, exactly once, and the gateways recover.
func TestBrokerRestartLosesNothingConfirmed(t *testing.T) {
	if testing.Short() {
		t.Skip("stops the broker")
	}
	url := brokerURL(t)
	rmqctl(t, "status") // fail fast without a controllable node
	brokerFaultDuringSends(t, "broker stop_app/start_app", url, func() {
		rmqctl(t, "stop_app")
		time.Sleep(time.Second)
		rmqctl(t, "start_app")
	})
}

// TestBrokerKill9LosesNothingConfirmed: the same 10k sends while a private
// broker's VM is kill -9ed and restarted on its data directory.
func TestBrokerKill9LosesNothingConfirmed(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a broker")
	}
	b := brokertest.StartPrivate(t)
	brokerFaultDuringSends(t, "broker kill -9 + restart", b.URL, func() { b.CrashRestart(t) })
}

// brokerFaultDuringSends sends 10k replies from host A to host B's primary
// through the broker at url, runs fault once a fifth are confirmed, and
// checks every confirmed send arrives exactly once.
func brokerFaultDuringSends(t *testing.T, what, url string, fault func()) {
	const n = 10000
	ga := gatewaytest.StartHost(t, gatewaytest.UniqueHost("fa"), url)
	gb := gatewaytest.StartHost(t, gatewaytest.UniqueHost("fb"), url)
	ctx := context.Background()
	w := gatewaytest.RegisterOn(t, ga, "w", bridge.RoleWorker)
	p := gatewaytest.RegisterOn(t, gb, "lead", bridge.RolePrimary)
	target := "lead@" + gb.Host()
	gatewaytest.Eventually(t, 10*time.Second, "A sees lead", func() bool { _, err := ga.Core().Resolve(target); return err == nil })

	var confirmed, failed atomic.Int64
	var sentOK sync.Map
	var firstAfter atomic.Int64 // unix nanos of the first confirm after start_app
	var startedNS atomic.Int64
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for k := 0; k < 4; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= n {
					return
				}
				body := fmt.Sprintf("r%05d", i)
				sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
				_, err := ga.Core().Send(sctx, w.GID, bridge.SendRequest{Target: target, Message: body}, nil)
				cancel()
				if err != nil {
					if failed.Add(1) <= 3 {
						t.Logf("send %s refused: %v", body, err)
					}
					continue
				}
				confirmed.Add(1)
				sentOK.Store(body, true)
				if st := startedNS.Load(); st != 0 && time.Now().UnixNano() > st {
					firstAfter.CompareAndSwap(0, time.Now().UnixNano())
				}
			}
		}()
	}
	gatewaytest.Eventually(t, 60*time.Second, "a fifth sent", func() bool { return confirmed.Load() > n/5 })
	stopAt := time.Now()
	fault()
	startedAt := time.Now()
	startedNS.Store(startedAt.UnixNano())
	wg.Wait()
	elapsed := time.Since(start)
	if firstAfter.Load() == 0 {
		t.Fatalf("all %d sends finished before the broker came back: the outage did not overlap them (raise n)", n)
	}
	recovered := time.Duration(firstAfter.Load() - startedAt.UnixNano())

	// A send cut by an outage longer than the publish bound fails with
	// "outcome unknown" when its publish may have reached the broker: such a
	// message may arrive too, so count only the confirmed ones to know when
	// everything that must arrive has.
	got := map[string]int{}
	confirmedIn := func() (n int64) {
		sentOK.Range(func(k, _ any) bool {
			if got[k.(string)] > 0 {
				n++
			}
			return true
		})
		return n
	}
	deadline := time.Now().Add(90 * time.Second)
	for confirmedIn() < confirmed.Load() && time.Now().Before(deadline) {
		r, err := gb.Core().Poll(ctx, p.GID, bridge.PollRequest{Max: 500, Wait: 2 * time.Second}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range r.Messages {
			got[m.Body]++
		}
	}
	lost, dups := 0, 0
	sentOK.Range(func(k, _ any) bool {
		if got[k.(string)] == 0 {
			lost++
		}
		return true
	})
	for _, c := range got {
		if c > 1 {
			dups++
		}
	}
	t.Logf("%s (down %.1fs) during %d sends over %v: %d confirmed, %d refused, %d received, %d confirmed lost, %d duplicates; sends flowed again %.2fs after the broker was back",
		what, startedAt.Sub(stopAt).Seconds(), n, elapsed.Round(time.Millisecond), confirmed.Load(), failed.Load(), len(got), lost, dups, recovered.Seconds())
	if lost != 0 || dups != 0 {
		t.Fatalf("%d confirmed lost, %d duplicates", lost, dups)
	}
}
