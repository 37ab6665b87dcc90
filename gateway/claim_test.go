package gateway_test

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// claimDial opens an "mcp" session of name as claimant id (pid, pane).
func claimDial(g *gateway.Gateway, name, role, pane, id string, pid int, takeover bool) (net.Conn, gateway.Reply, error) {
	c, _, r, err := gateway.Dial(g.StateDir(), gateway.Request{Op: "mcp", Name: name, Role: role, PaneID: pane,
		Claim: &bridge.Claimant{PID: pid, ID: id}, Takeover: takeover})
	return c, r, err
}

func mustRefuse(t *testing.T, r gateway.Reply, err error, wants ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("accepted; want refused")
	}
	if r.Code != gateway.CodeNameHeld {
		t.Fatalf("code %q, error %v", r.Code, err)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error %q does not say %q", err, w)
		}
	}
}

// TestNameHeldByLiveSession: a second live session of another claimant (or
// another role) is refused, naming the holder and the way out; the same
// claimant re-attaches; once the holder is gone the name re-attaches to
// the same entity.
func TestNameHeldByLiveSession(t *testing.T) {
	g := gatewaytest.StartLocal(t, "")
	c1, r1, err := claimDial(g, "w", "worker", "", "claim-a", 111, false)
	if err != nil {
		t.Fatal(err)
	}
	_, r, err := claimDial(g, "w", "worker", "", "claim-b", 222, false)
	mustRefuse(t, r, err, `name "w" is in use by a live session (pid 111, role worker)`, "--name NEW", "--takeover")
	c2, _, err := claimDial(g, "w", "worker", "", "claim-a", 111, false) // the relay reconnecting before the old connection closed
	if err != nil {
		t.Fatalf("same claimant: %v", err)
	}
	_, r, err = claimDial(g, "w", "primary", "", "claim-a", 111, false)
	mustRefuse(t, r, err, "role worker")
	r, err = gateway.Ask(g.StateDir(), gateway.Request{Op: "register", Name: "w", Role: "worker"})
	mustRefuse(t, r, err, "--takeover")
	if e, _ := g.Core().Entity(r1.Entity.GID); e.Role != bridge.RoleWorker {
		t.Fatalf("a refusal changed the role: %+v", e)
	}

	c1.Close()
	c2.Close()
	gatewaytest.Eventually(t, 10*time.Second, "the name is released", func() bool {
		_, held := g.Core().Holder(r1.Entity.GID)
		return !held
	})
	c3, r3, err := claimDial(g, "w", "worker", "", "claim-b", 222, false)
	if err != nil {
		t.Fatalf("after the holder left: %v", err)
	}
	defer c3.Close()
	if r3.Entity.GID != r1.Entity.GID {
		t.Fatalf("re-attach made a new entity: %s, was %s", r3.Entity.GID, r1.Entity.GID)
	}
}

// TestPaneIsTheClaimant: in herdr the pane is the claimant (a restarted
// MCP server in the same pane has a new claim id); another pane is not.
func TestPaneIsTheClaimant(t *testing.T) {
	g := gatewaytest.StartLocal(t, "")
	c1, _, err := claimDial(g, "lead", "primary", "w1:p1", "x", 10, false)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	c2, _, err := claimDial(g, "lead", "primary", "w1:p1", "y", 11, false)
	if err != nil {
		t.Fatalf("same pane, new process: %v", err)
	}
	defer c2.Close()
	_, r, err := claimDial(g, "lead", "primary", "w1:p2", "y", 11, false)
	mustRefuse(t, r, err, "pane w1:p1", "role primary")
}

// TestTakeover: --takeover closes the holder's session; its relay, refused
// on reconnect, ends saying it lost the name; register --takeover works
// the same way.
func TestTakeover(t *testing.T) {
	g := gatewaytest.StartLocal(t, "")
	inR, inW := io.Pipe()
	defer inW.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- gateway.Relay(ctx, g.StateDir(), gateway.Request{Op: "mcp", Name: "w", Role: "worker"}, inR, io.Discard, nil)
	}()
	gatewaytest.Eventually(t, 10*time.Second, "the relay holds w", func() bool {
		e, err := g.Core().Resolve("w")
		if err != nil {
			return false
		}
		_, held := g.Core().Holder(e.GID)
		return held
	})
	c, _, err := claimDial(g, "w", "worker", "", "new", 2, true)
	if err != nil {
		t.Fatalf("takeover: %v", err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), `lost the name "w"`) {
			t.Fatalf("relay ended with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the relay kept the name")
	}
	r, err := gateway.Ask(g.StateDir(), gateway.Request{Op: "register", Name: "w", Role: "worker", Takeover: true})
	if err != nil || r.Token == "" {
		t.Fatalf("register --takeover: %v", err)
	}
	// the taken-over session is closed
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("the session register took over is still open: %v", err)
	}
}

// TestRelayReattachesAfterRestart: the relay's reconnect after a gateway
// restart is the same claimant: it gets its name back and calls work.
func TestRelayReattachesAfterRestart(t *testing.T) {
	dir := gatewaytest.TempDir(t)
	g := gatewaytest.StartLocal(t, dir)
	w := gatewaytest.StdioConn(t, g, "w", "worker")
	if r := w.Call("bridge_roster", nil); r.IsError || !strings.Contains(r.Text, "w@") {
		t.Fatalf("roster: %+v", r)
	}
	g.Close()
	g2 := gatewaytest.StartLocal(t, dir)
	gatewaytest.Eventually(t, 20*time.Second, "the relay re-attached", func() bool {
		e, err := g2.Core().Resolve("w")
		if err != nil {
			return false
		}
		_, held := g2.Core().Holder(e.GID)
		return held
	})
	if r := w.Call("bridge_roster", nil); r.IsError || !strings.Contains(r.Text, "w@") {
		t.Fatalf("roster: %+v", r)
	}
	_, r, err := claimDial(g2, "w", "worker", "", "someone-else", 3, false)
	mustRefuse(t, r, err, "in use by a live session")
}
