package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// writeDeadLetters is `herdbridge dlq list` as a table. A dead letter's
// kind, ids, reason and queue are what its headers said, and anyone who
// may publish on the broker can write those (the dead-letter exchange
// takes any message): every column goes through printable, so none can
// carry a terminal escape (ESC ] 52 sets the clipboard, ESC [ 2J clears
// the screen) or a line break into the operator's terminal.
func writeDeadLetters(w io.Writer, dead []bridge.DeadLetterRecord) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tKIND\tMSGID\tFROM\tTO\tREASON\tREPORTED")
	for _, d := range dead {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.At.Format(time.RFC3339), printable(d.Kind), printable(d.MsgID),
			printable(d.From), printable(d.To), printable(d.Reason), printable(reportedColumn(d)))
	}
	return tw.Flush()
}
