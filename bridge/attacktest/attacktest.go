// Package attacktest is the signed-envelope attack suite (SPEC §3): an
// attacker with raw access to the network two gateways share publishes,
// N messages per attack, unsigned, tampered, untrusted, rerouted,
// replayed, expired, future, oversized, malformed and impostor envelopes
// and forged dead letters, while host B's worker keeps replying to host
// A's primary. Each attack must be refused and counted with its reason,
// dead-lettered, and reach no entity; no forged dead letter makes a
// gateway write a FAILED to whoever it names; the legitimate traffic
// loses and doubles nothing.
//
// A deployment's own test runs it, as transporttest runs for transports:
//
//	func TestAttackerOnNetwork(t *testing.T) {
//		attacktest.Run(t, attacktest.Harness{Start: ...})
//	}
//
// The in-memory network (bridge/memnet/memnettest) and whole gateways on a
// real RabbitMQ (gateway/) run it.
package attacktest

import (
	"log/slog"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// The exchanges of SPEC §5 the attacker publishes to.
const (
	ExchangeMsg    = "bridge.msg"
	ExchangeRoster = "bridge.roster"
	ExchangeDLX    = "bridge.dlx"
)

// Harness starts the deployment under attack.
type Harness struct {
	// N is how many messages each attack publishes (default 5).
	N int
	// Timeout bounds every wait for something that must happen
	// (default 10 s).
	Timeout time.Duration
	// Pace is the pause between two legitimate replies (default 1 ms):
	// traffic all along the attack, not a load.
	Pace time.Duration
	// Start starts two gateways, A and B, that trust each other and the
	// host Deployment.Evil, on one network; the cores of A and B log to
	// logA and logB (besides whatever the harness logs to). Required.
	Start func(t *testing.T, logA, logB slog.Handler) Deployment
}

// Deployment is what Harness.Start started, and the attacker's access.
type Deployment struct {
	A, B *bridge.Core // running; entities are registered by the suite
	// Evil is a host A and B trust with no gateway of its own (a
	// compromised peer); EvilKey is its host key, which the attacker holds.
	Evil    string
	EvilKey bridge.Signer
	// Stranger is a key no gateway trusts.
	Stranger bridge.Signer
	// Publish publishes raw headers and body on exchange ex with routing
	// key, as anyone with broker access can: nothing validated or signed.
	// It returns once the network has taken it.
	Publish func(t testing.TB, ex, key string, headers map[string]any, body []byte)
	// Tap binds a queue of the attacker's own to ex with key: get takes
	// the oldest raw message it captured since (ok false: none yet).
	Tap func(t testing.TB, ex, key string) (get func() (headers map[string]any, body []byte, ok bool))
}

// Report is what the attack did, for a runner's own further checks (the
// gateway's stats and audit log).
type Report struct {
	N     int // messages per attack
	Cases int // attacks
	// Refused is how many messages A refused during the whole run, by
	// reason.
	Refused map[string]uint64
}

// Run runs the attack against h's deployment.
func Run(t *testing.T, h Harness) Report {
	t.Helper()
	if h.Start == nil {
		t.Fatal("attacktest: Harness.Start is required")
	}
	h = h.withDefaults()
	a := newAttack(t, h)
	a.capture()
	legit := a.startLegit()
	got := a.startDrain()
	aBefore, bBefore := a.d.A.Refused(), a.d.B.Refused()
	cases := a.cases()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { a.runCase(t, c) })
	}
	a.forgeDeadLetters()
	legit.stop()
	got.until(a, legit.sent())
	got.stop()
	a.checkDeadLetters(len(cases), a.checkB(bBefore))
	a.checkDeliveries(got, legit)
	return Report{N: h.N, Cases: len(cases), Refused: diff(a.d.A.Refused(), aBefore)}
}

func (h Harness) withDefaults() Harness {
	if h.N <= 0 {
		h.N = 5
	}
	if h.Timeout <= 0 {
		h.Timeout = 10 * time.Second
	}
	if h.Pace <= 0 {
		h.Pace = time.Millisecond
	}
	return h
}

// diff is now minus before, reasons that did not change left out.
func diff(now, before map[string]uint64) map[string]uint64 {
	d := map[string]uint64{}
	for k, v := range now {
		if v != before[k] {
			d[k] = v - before[k]
		}
	}
	return d
}
