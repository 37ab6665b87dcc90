package cliout

import (
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// TestDeadLettersPrintable: a dead letter whose headers a publisher on the
// broker wrote (escapes, line breaks) is listed on one line with no
// control character.
func TestDeadLettersPrintable(t *testing.T) {
	evil := "x\x1b]52;c;cm0gLXJmIH4=\a\x1b[2J\r\nAT  SEND  forged row\t\u009b31m"
	var b strings.Builder
	err := DeadLetters(&b, []bridge.DeadLetterRecord{{At: time.Unix(0, 0).UTC(), Kind: evil, MsgID: evil, From: evil, To: evil, Reason: evil, Queue: evil}})
	if err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if n := strings.Count(out, "\n"); n != 2 {
		t.Fatalf("%d lines, want the header and one row: %q", n, out)
	}
	for _, r := range strings.TrimSuffix(out, "\n") {
		if r != '\n' && (r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f) {
			t.Fatalf("control %U listed: %q", r, out)
		}
	}
}

// TestPrintableTrace: what another host sent cannot steer the terminal.
func TestPrintableTrace(t *testing.T) {
	if got := Printable("ok\x1b[31mred\r\n\u009b"); got != "ok?[31mred???" {
		t.Fatalf("%q", got)
	}
}
