package cliout

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/gateway"
)

// Roster is `herdbridge roster`: one line per host with its spawn profiles
// (and key and trust), then the entities as a table.
func Roster(w io.Writer, v *bridge.RosterView) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, h := range v.Hosts {
		key := ""
		if h.Key != "" {
			key = "\tkey " + h.Key
		}
		if h.Trust != "" {
			key += "\ttrust " + h.Trust // both | one-way | untrusted | unknown; doctor says why
		}
		if h.Seal != "" {
			key += "\tseal " + h.Seal // sealed | clear | no key: what goes to it crosses the broker so
		}
		fmt.Fprintf(tw, "host %s\tprofiles: %s%s\n", h.Host, strings.Join(h.Profiles, ","), key)
	}
	fmt.Fprintln(tw, "NAME\tROLE\tSTATUS\tHELD\tGROUPS\tGID")
	for _, e := range v.Entities {
		fmt.Fprintf(tw, "%s@%s\t%s\t%s\t%d\t%s\t%s\n", e.Name, e.Host, e.Role, e.Status, e.Held, strings.Join(e.Groups, ","), e.GID)
	}
	return tw.Flush()
}

// Stats is `herdbridge stats`: signing, the broker link, the runtime, the
// audit log and the refusals by reason.
func Stats(w io.Writer, st *gateway.Stats) error {
	signing := "off (embedded transport: this host only)"
	if st.Signing {
		signing = "on, host key " + st.Key
	}
	fmt.Fprintf(w, "host %s; signing %s; audit log %s\n", st.Host, signing, st.Audit)
	if st.Delay != "" {
		fmt.Fprintln(w, st.Delay)
	}
	if b := st.Broker; b != nil {
		state := "connected to"
		if !b.Connected {
			state = "NOT connected; last connected to"
		}
		fmt.Fprintf(w, "broker: %s node %s\n", state, b.Describe())
	}
	if st.Broker != nil {
		fmt.Fprintf(w, "presence: %d other hosts, %d of their entities\n", st.Presence.Hosts, st.Presence.Entities)
	}
	if rt := st.Runtime; rt != nil {
		fmt.Fprintf(w, "runtime: %d goroutines, heap %.1f MiB (%.1f MiB more held free), RSS %.1f MiB (%.1f anonymous, %.1f file-backed), %d open files, CPU %.2f s\n",
			rt.Goroutines, mib(rt.HeapBytes), mib(rt.HeapFreeBytes), mib(rt.RSSBytes), mib(rt.RSSAnonBytes), mib(rt.RSSFileBytes), rt.OpenFiles, rt.CPUSeconds)
	}
	if st.AuditDropped > 0 || st.AuditError != "" {
		fmt.Fprintf(w, "audit records dropped: %d (%s)\n", st.AuditDropped, st.AuditError)
	}
	if qt := st.QueueType; qt != nil {
		fmt.Fprintf(w, "broker queues: %s (%s)\n", qt.Type, qt.Why)
	}
	reasons := make([]string, 0, len(st.Refused))
	for k := range st.Refused {
		reasons = append(reasons, k)
	}
	sort.Strings(reasons)
	if len(reasons) == 0 {
		fmt.Fprintln(w, "refused: none")
	}
	for _, k := range reasons {
		fmt.Fprintf(w, "refused %-20s %d\n", k, st.Refused[k])
	}
	return nil
}

// mib is bytes in MiB, for figures people read.
func mib(b uint64) float64 { return float64(b) / (1 << 20) }
