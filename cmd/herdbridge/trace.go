package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/gateway"
)

// traceMaxWait caps --wait below the admin socket's 30 s reply deadline.
const traceMaxWait = 20 * time.Second

func traceCommand(stdout io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:   "trace TRACE_ID|MSG_ID [--wait 5s] [--json]",
		Short: "List the hops of one conversation on every host, in time order",
		Long: `List the hops of one conversation (a traceId) or of one message and its receipts
and reply (a msgId): publish, accept or refuse, hold, queue, inject, drain, expire,
dead letter — from this host's audit log and from every other host in presence,
asked over the control plane (metadata only, never a body). A host that does not
answer within --wait is listed as such. Times are each host's own clock.`,
		Example: "  herdbridge trace 3f1a0c9e-5b6d-4e7f-8a9b-0c1d2e3f4a5b\n  herdbridge trace 3f1a0c9e-5b6d-4e7f-8a9b-0c1d2e3f4a5b --json",
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return &usageError{err: fmt.Errorf("trace: want one traceId or msgId, got %d arguments", len(args)), line: c.UseLine(), path: c.CommandPath()}
			}
			return nil
		},
	}
	fs, dir := newFlags(c)
	asJSON := fs.Bool("json", false, "print JSON")
	wait := fs.Duration("wait", bridge.TraceWait, "how long to wait for the other hosts' answers (at most 20s)")
	c.RunE = func(_ *cobra.Command, args []string) error {
		if *wait <= 0 || *wait > traceMaxWait {
			return &usageError{err: fmt.Errorf("trace: --wait %v is out of range (above 0, at most %v)", *wait, traceMaxWait), line: c.UseLine(), path: c.CommandPath()}
		}
		r, err := gateway.Ask(*dir, gateway.Request{Op: "trace", ID: args[0], WaitMs: wait.Milliseconds()})
		if err != nil {
			return err
		}
		if r.Trace == nil {
			return errors.New("trace: the gateway sent none (an older gateway? restart it)")
		}
		if *asJSON {
			if err := json.NewEncoder(stdout).Encode(traceJSON(r.Trace)); err != nil {
				return err
			}
		} else {
			printTrace(stdout, r.Trace)
		}
		return r.Trace.NotFound()
	}
	return c
}

// traceOut is `trace --json`: the timeline, then what each host searched.
type traceOut struct {
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

func traceJSON(rep *bridge.TraceReport) traceOut {
	out := traceOut{ID: rep.ID, Hops: rep.Timeline(), Names: rep.Names, Note: traceClockNote}
	if out.Hops == nil {
		out.Hops = []bridge.TraceHop{}
	}
	for _, h := range rep.Hosts {
		out.Hosts = append(out.Hosts, traceHostOut{Host: h.Host, Hops: len(h.Hops), Scope: h.Scope, Truncated: h.Truncated, Error: h.Error})
	}
	return out
}

// printTrace prints one line per hop, then the hosts that had nothing to say.
func printTrace(w io.Writer, rep *bridge.TraceReport) {
	hops := rep.Timeline()
	if len(hops) > 0 {
		fmt.Fprintf(w, "trace %s: %d hops on %d host(s); times are each host's own clock\n", rep.ID, len(hops), len(rep.Hosts))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TIME (UTC)\tHOST\tHOP\tKIND\tMSG\tFROM → TO\tSTATUS\t+SINCE PREV")
		for _, h := range hops {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s → %s\t%s\t%s\n", h.At.UTC().Format("15:04:05.000"), printable(h.Seen), printable(string(h.Hop)),
				printable(string(h.Kind)), shortID(h.MsgID), traceName(rep, h.From), traceName(rep, h.To), traceStatus(h), sinceText(h))
		}
		tw.Flush()
	}
	for _, h := range rep.Hosts {
		switch {
		case h.Error != "":
			fmt.Fprintf(w, "%s: %s\n", printable(h.Host), printable(h.Error))
		case h.Truncated:
			fmt.Fprintf(w, "%s: more than %d hops matched; the earliest are listed\n", printable(h.Host), bridge.TraceMaxHops)
		}
	}
}

// traceStatus is a hop's verdict and, when it measured one, its own latency.
func traceStatus(h bridge.TraceHop) string {
	s := printable(h.Verdict)
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
		return printable(n)
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
	return printable(id)
}

// printable keeps what another host sent from steering the terminal:
// control characters become '?'.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return '?'
		}
		return r
	}, s)
}
