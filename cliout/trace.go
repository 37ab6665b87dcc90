package cliout

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// TraceOut is `trace --json`: the timeline, then what each host searched.
type TraceOut struct {
	ID    string            `json:"id"`
	Hops  []bridge.TraceHop `json:"hops"`
	Hosts []traceHostOut    `json:"hosts"`
	Names map[string]string `json:"names,omitempty"`
	Note  string            `json:"note"`
}

type traceHostOut struct {
	Host      string            `json:"host"`
	Hops      int               `json:"hops"`
	Scope     bridge.TraceScope `json:"scope"`
	Truncated bool              `json:"truncated,omitempty"`
	Error     string            `json:"error,omitempty"`
}

const traceClockNote = "times are each host's own clock; a hop marked skewed has an earlier time than its message's publish (its host's clock is behind) and is listed after it"

func TraceJSON(rep *bridge.TraceReport) TraceOut {
	out := TraceOut{ID: rep.ID, Hops: rep.Timeline(), Names: rep.Names, Note: traceClockNote}
	if out.Hops == nil {
		out.Hops = []bridge.TraceHop{}
	}
	for _, h := range rep.Hosts {
		out.Hosts = append(out.Hosts, traceHostOut{Host: h.Host, Hops: len(h.Hops), Scope: h.Scope, Truncated: h.Truncated, Error: h.Error})
	}
	return out
}

// Trace prints one line per hop, then the hosts that had nothing to say.
func Trace(w io.Writer, rep *bridge.TraceReport) {
	hops := rep.Timeline()
	if len(hops) > 0 {
		fmt.Fprintf(w, "trace %s: %d hops on %d host(s); times are each host's own clock\n", rep.ID, len(hops), len(rep.Hosts))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TIME (UTC)\tHOST\tHOP\tKIND\tMSG\tFROM → TO\tSTATUS\t+SINCE PREV")
		for _, h := range hops {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s → %s\t%s\t%s\n", h.At.UTC().Format("15:04:05.000"), Printable(h.Seen), Printable(string(h.Hop)),
				Printable(string(h.Kind)), shortID(h.MsgID), traceName(rep, h.From), traceName(rep, h.To), traceStatus(h), sinceText(h))
		}
		tw.Flush()
	}
	for _, h := range rep.Hosts {
		switch {
		case h.Error != "":
			fmt.Fprintf(w, "%s: %s\n", Printable(h.Host), Printable(h.Error))
		case h.Truncated:
			fmt.Fprintf(w, "%s: more than %d hops matched; the earliest are listed\n", Printable(h.Host), bridge.TraceMaxHops)
		}
	}
}

// traceStatus is a hop's verdict and, when it measured one, its own latency.
func traceStatus(h bridge.TraceHop) string {
	s := Printable(h.Verdict)
	if h.LatencyMs > 0 {
		s += fmt.Sprintf(" (%s %s)", hopLatencyName(h.Hop), msText(h.LatencyMs))
	}
	if h.Skewed {
		s += " [skewed clock]"
	}
	return s
}

// hopLatencyName says what a hop's own latency measured (bridge.Hop).
func hopLatencyName(h bridge.Hop) string {
	switch h {
	case bridge.HopPublish:
		return "confirmed in"
	case bridge.HopInject:
		return "typing"
	case bridge.HopAccept, bridge.HopDrain:
		return "since sent"
	default:
		return "took"
	}
}

func sinceText(h bridge.TraceHop) string {
	if h.SinceMs == nil {
		return "-"
	}
	return "+" + msText(*h.SinceMs)
}

func msText(ms float64) string {
	return time.Duration(ms * float64(time.Millisecond)).Round(time.Millisecond / 10).String()
}

// traceName is gid's name@host when the gateway knows it, else the start
// of the gid.
func traceName(rep *bridge.TraceReport, gid string) string {
	if n := rep.Names[gid]; n != "" {
		return Printable(n)
	}
	if gid == "" {
		return "-"
	}
	return shortID(gid)
}

func shortID(id string) string {
	if len(id) > 8 {
		id = id[:8]
	}
	return Printable(id)
}
