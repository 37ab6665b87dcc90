package cliout

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// DeadLetters is `herdbridge dlq list` as a table. A dead letter's
// kind, ids, reason and queue are what its headers said, and anyone who
// may publish on the broker can write those (the dead-letter exchange
// takes any message): every column goes through printable, so none can
// carry a terminal escape (ESC ] 52 sets the clipboard, ESC [ 2J clears
// the screen) or a line break into the operator's terminal.
func DeadLetters(w io.Writer, dead []bridge.DeadLetterRecord) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tKIND\tMSGID\tFROM\tTO\tREASON\tREPORTED")
	for _, d := range dead {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.At.Format(time.RFC3339), Printable(d.Kind), Printable(d.MsgID),
			Printable(d.From), Printable(d.To), Printable(d.Reason), Printable(reportedColumn(d)))
	}
	return tw.Flush()
}

// reportedColumn says who told a dead letter's sender: this gateway
// ("true", or "true (consumed by <host>)" for one another host's gateway
// forwarded), its sender's host ("forwarded to <host>"), or nobody.
func reportedColumn(d bridge.DeadLetterRecord) string {
	switch {
	case d.ForwardedTo != "":
		return "forwarded to " + d.ForwardedTo
	case d.Reported && d.ConsumedBy != "":
		return "true (consumed by " + d.ConsumedBy + ")"
	}
	return fmt.Sprint(d.Reported)
}
