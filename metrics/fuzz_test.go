package metrics_test

import (
	"testing"
	"unicode/utf8"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/metrics"
)

// FuzzEventLabels: whatever a sender wrote into the fields an Event copies
// from a message (its kind, a dead letter's reason, a refusal's status),
// the scrape still parses and no label takes a value outside its closed
// set: the series count cannot be driven up from outside.
func FuzzEventLabels(f *testing.F) {
	f.Add("SEND", "rejected: refused: to-mismatch", "publish")
	f.Add("EVIL\n{}", "x-death\"}", "refuse")
	f.Add("", "\xff", "deadletter")
	f.Fuzz(func(t *testing.T, kind, status, hop string) {
		m := metrics.New(metrics.Options{Core: newFakeCore(0)})
		for _, h := range []bridge.Hop{bridge.Hop(hop), bridge.HopPublish, bridge.HopRefuse, bridge.HopDeadLetter, bridge.HopInject, bridge.HopAccept} {
			m.Observe(bridge.Event{Hop: h, Kind: bridge.Kind(kind), Status: status, Corr: status, TraceID: status, From: kind, To: status})
		}
		fams := scrape(t, m)
		allowed := map[string]bool{"other": true, "none": true}
		for _, s := range []string{
			// kinds, hops, outcomes, reasons, rungs, histogram labels
			"SEND", "REPLY", "ASK", "ANSWER", "TOO_LATE", "NO_WAITER", "ABANDONED", "FAILED", "INJECTED", "BROADCAST", "PRESENCE", "SPAWN", "MISSED_ASK",
			"publish", "accept", "refuse", "hold", "drain", "queue", "inject", "expire", "deadletter",
			"published", "spooled", "failed", "accepted", "refused", "held", "drained", "queued", "expired", "deadlettered",
			"injected", "submitted", "uncertain", "maxlen", "rejected", "delivery_limit",
			"malformed", "unsupported-version", "oversized", "unknown-host", "bad-signature", "from-not-on-host", "to-mismatch",
			"future-ts", "replayed", "no-local-entity", "bad-kind", "reply", "answer",
		} {
			allowed[s] = true
		}
		for name, fam := range fams {
			if len(name) < 11 || name[:11] != "herdbridge_" {
				continue
			}
			for _, mt := range fam.Metric {
				for _, l := range mt.Label {
					if !allowed[l.GetValue()] || !utf8.ValidString(l.GetValue()) {
						t.Fatalf("%s{%s=%q}: a label outside its closed set", name, l.GetName(), l.GetValue())
					}
				}
			}
		}
	})
}
