package herdr

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/herdr/herdrtest"
)

// TestInterrupt: Escape is pressed once into a working agent and the
// receipt says interrupted only after the status left working; an idle
// agent gets no key (not_working); a gone pane fails; a custom agent
// herdr does not drive gets its Escape through pane.send_keys; an agent
// that ignores the Escape is reported uncertain.
func TestInterrupt(t *testing.T) {
	for _, proto := range []int{16, 22} {
		t.Run(fmt.Sprintf("protocol%d", proto), func(t *testing.T) {
			fake, c := newFake(t, herdrtest.WithProtocol(proto), herdrtest.WithTurnDuration(0))
			in := &Injector{Client: c, InterruptWait: 5 * time.Second}
			ctx := context.Background()
			pane := fake.AddAgent(herdrtest.PaneOptions{Name: "w1", Status: "working"})
			e := bridge.Entity{Name: "w1", PaneID: pane}
			r := in.Interrupt(ctx, e)
			if r.Status != bridge.StatusInterrupted || fake.Pane(pane).Interrupts != 1 || !Ready(fake.Status(pane)) {
				t.Fatalf("working agent: %+v, pane %+v", r, fake.Pane(pane))
			}
			if n := escapes(fake, pane); n != 1 {
				t.Fatalf("%d Escape writes, want 1", n)
			}
			if r := in.Interrupt(ctx, e); r.Status != bridge.StatusNotWorking || escapes(fake, pane) != 1 {
				t.Fatalf("idle agent: %+v, %d escapes", r, escapes(fake, pane))
			}
			blocked := fake.AddAgent(herdrtest.PaneOptions{Name: "w2", Status: "working"})
			fake.SetBlocked(blocked, true)
			if r := in.Interrupt(ctx, bridge.Entity{Name: "w2", PaneID: blocked}); r.Status != bridge.StatusInterrupted {
				t.Fatalf("agent on a dialog: %+v", r)
			}
			fake.ClosePane(pane)
			if r := in.Interrupt(ctx, e); r.Status != bridge.StatusFailed || !strings.Contains(r.Reason, "gone") {
				t.Fatalf("closed pane: %+v", r)
			}
		})
	}
}

// TestInterruptUncertain: an agent that ignores the Escape stays working,
// so the receipt is uncertain, not interrupted.
func TestInterruptUncertain(t *testing.T) {
	fake, c := newFake(t, herdrtest.WithTurnDuration(0))
	in := &Injector{Client: c, InterruptWait: 300 * time.Millisecond}
	pane := fake.AddAgent(herdrtest.PaneOptions{Agent: "my-agent", Name: "custom", Status: "working"})
	fake.IgnoreEscape(pane)
	r := in.Interrupt(context.Background(), bridge.Entity{Name: "custom", PaneID: pane})
	if r.Status != bridge.StatusUncertain || fake.Status(pane) != "working" || escapes(fake, pane) != 1 {
		t.Fatalf("%+v, status %s", r, fake.Status(pane))
	}
}

// escapes counts the PTY writes to pane that were a lone Escape.
func escapes(fake *herdrtest.Server, pane string) int {
	n := 0
	for _, w := range fake.Writes(pane) {
		if string(w) == "\x1b" {
			n++
		}
	}
	return n
}
