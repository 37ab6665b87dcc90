package benchreport

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/herdbridge/herdbridge/loadtest"
)

// The scale harness's reports (`make scale`, issue 25): G real gateway
// processes on one broker (scale-out/scale.json) and the in-process
// simulation of 100 and 1,000 hosts (scale-out/sim.json). Their types are
// the harness's own (loadtest), so a renamed field fails to compile here.
type (
	Scale    = loadtest.ScaleReport
	ScaleRow = loadtest.ScaleRow
	Sim      = loadtest.SimReport
	SimRow   = loadtest.SimRow
)

// ParseScale reads scale.json. A report without rows, or with a figure
// that is not a number JSON can carry back (NaN, ±Inf never parse), is
// refused.
func ParseScale(r io.Reader) (*Scale, error) {
	s, err := loadtest.ParseScale(r)
	if err != nil {
		return nil, fmt.Errorf("benchreport: %w", err)
	}
	for _, row := range s.Rows {
		if row.Gateways < 1 || row.Entities < 0 {
			return nil, fmt.Errorf("benchreport: the scale run's JSON has a row of %d gateways × %d entities", row.Gateways, row.Entities)
		}
	}
	return s, nil
}

// ParseSim reads sim.json (TestPresenceSimulatedScale's HB_SCALE_JSON).
func ParseSim(r io.Reader) (*Sim, error) {
	s, err := loadtest.ParseSim(r)
	if err != nil {
		return nil, fmt.Errorf("benchreport: %w", err)
	}
	for _, row := range s.Rows {
		if row.Hosts < 1 || math.IsNaN(row.DeliveriesPerS) {
			return nil, fmt.Errorf("benchreport: the simulation's JSON has a row of %d hosts", row.Hosts)
		}
	}
	return s, nil
}

// notMeasuredScale is what the section says for a missing report.
const notMeasuredScale = "not measured in this run: run make scale"

// renderScale writes the "Scale (issue 25)" section: the real processes'
// rows and the simulation's, each with the commit and date they were
// measured on (make scale's, which may be older than the benchmarks'),
// or why they are missing.
func renderScale(b *strings.Builder, r Report) {
	b.WriteString("## Scale (issue 25)\n\n")
	b.WriteString("Presence by host against per-entity presence (`--presence-per-entity`, the behaviour before issue 25), both\n" +
		"measured in the same `make scale` run: G gateway processes × E entities each on one throwaway broker. Deliveries/s\n" +
		"are the broker's presence traffic at idle; the ratio is by host ÷ per entity.\n\n")
	switch s := r.Scale; {
	case s == nil:
		fmt.Fprintf(b, "Real gateways: %s.\n\n", missingText(r.ScaleMissing))
	default:
		fmt.Fprintf(b, "Real gateways: measured %s on commit %s (`scale-out/scale.json`); %s; load average %s at the start, %s at the end; %s. "+
			"Heartbeat period %g s, idle figures over %g s starting %g s after convergence; deliveries from %s.\n\n",
			s.Started.UTC().Format("2006-01-02 15:04 UTC"), orUnknown(s.Commit), s.Machine, orUnknown(s.LoadStart), orUnknown(s.LoadEnd),
			s.Broker, s.IntervalS, s.IdleWindowS, s.SettleS, s.DeliveriesSource)
		loadtest.ScaleTable(b, s)
		for _, v := range s.Verdicts() {
			fmt.Fprintf(b, "- %s\n", v)
		}
		for _, f := range s.Failures {
			fmt.Fprintf(b, "- **failed**: %s\n", f)
		}
		if len(s.Verdicts())+len(s.Failures) > 0 {
			b.WriteString("\n")
		}
	}
	switch s := r.Sim; {
	case s == nil:
		fmt.Fprintf(b, "Simulated hosts (in-process, `bridge/memnet`): %s.\n\n", missingText(r.SimMissing))
	default:
		b.WriteString("Simulated hosts (in-process, `bridge/memnet`, `TestPresenceSimulatedScale`; `scale-out/sim.json`, written by the same `make scale`):\n\n")
		loadtest.SimTable(b, s)
	}
}

// missingText is the "not measured" sentence, with why when known.
func missingText(why string) string {
	if why == "" {
		return notMeasuredScale
	}
	return notMeasuredScale + " (" + why + ")"
}
