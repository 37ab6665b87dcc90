package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/herdr/herdrtest"
)

// TestPaneQueueCrash kills the worker's gateway (a real process, kill -9)
// while it types one brief into a pane and ten more wait in the pane's
// queue. After the restart: no brief is typed twice, the ten queued ones
// are typed in order with their receipts held for the sender, and the one
// in flight is reported uncertain.
func TestPaneQueueCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a real gateway")
	}
	const queuedN = 10
	fake := herdrtest.New(t, herdrtest.WithTurnDuration(100*time.Millisecond))
	pane := fake.AddAgent(herdrtest.PaneOptions{Agent: "claude", Seen: true})
	bin := buildBinary(t)
	gp, p := startPaneGateway(t, bin, fake, pane, map[string]any{
		"herdr":       map[string]any{"socket": fake.SocketPath(), "injectWait": "30s", "paneNudge": false},
		"receiptWait": "2s",
	})
	dir := gp.dir

	// the first brief is typed (herdr runs agent.prompt) but its reply is
	// held back: the gateway is inside the inject when it dies
	prompts := func() int { return strings.Count(strings.Join(fake.Requests(), "\n"), `"method":"agent.prompt"`) }
	fake.DelayNextReply("agent.prompt", time.Minute)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, _ = p.CallCtx(ctx, "bridge_send", map[string]any{"target": "w", "message": "brief-in-flight"})
	}()
	gatewaytest.Eventually(t, 10*time.Second, "the first brief being typed", func() bool { return prompts() == 1 })
	ids := map[string]string{} // msgId -> body
	for i := range queuedN {
		body := fmt.Sprintf("brief-queued-%02d", i)
		r := p.MustStatus("bridge_send", map[string]any{"target": "w", "message": body}, "queued")
		ids[r.MsgID] = body
	}
	gp.kill()
	p.Client.Close()
	gp = startGatewayProc(t, bin, dir)
	p = procConn(t, gp, "lead", "primary")

	uncertain, receipts := 0, map[string]string{}
	deadline := time.Now().Add(30 * time.Second)
	for (uncertain == 0 || len(receipts) < queuedN) && time.Now().Before(deadline) {
		r := p.Call("bridge_poll", map[string]any{"wait_s": 1, "max": 100})
		for _, m := range r.Messages {
			switch {
			case m.Kind == bridge.KindInjected && strings.HasPrefix(m.Body, "uncertain") && strings.Contains(m.Body, "brief-in-flight"):
				uncertain++
			case ids[m.Corr] != "" && !strings.HasPrefix(m.Body, bridge.StatusQueued):
				if prev, dup := receipts[m.Corr]; dup {
					t.Errorf("%s: two receipts: %q, %q", ids[m.Corr], prev, m.Body)
				}
				receipts[m.Corr] = string(m.Kind) + " " + m.Body
			}
		}
	}
	if uncertain != 1 {
		t.Errorf("the brief in flight reported uncertain %d times, want 1", uncertain)
	}
	twice := 0
	for _, body := range append([]string{"brief-in-flight"}, sortedValues(ids)...) {
		n := 0
		for _, w := range fake.Writes(pane) {
			n += bytes.Count(w, []byte(body))
		}
		if n > 1 {
			twice++
		}
		if n != 1 {
			t.Errorf("%s written %d times, want once", body, n)
		}
	}
	for id, body := range ids {
		if rec := receipts[id]; !strings.HasPrefix(rec, "INJECTED submitted") {
			t.Errorf("%s: receipt %q", body, rec)
		}
	}
	subs := fake.Submitted(pane)
	for i := 1; i < len(subs); i++ {
		if want := fmt.Sprintf("brief-queued-%02d", i-1); !strings.Contains(subs[i], want) {
			t.Errorf("turn %d is %q, want %s", i, subs[i], want)
		}
	}
	t.Logf("kill -9 with 1 brief being typed and %d queued: typed twice %d, queued ones typed after restart %d/%d (receipts held %d), in flight reported uncertain %d",
		queuedN, twice, max(0, len(subs)-1), queuedN, len(receipts), uncertain)
}

// startPaneGateway runs a gateway process with config in a new state dir,
// with a worker "w" registered in pane and a primary "lead" connected.
func startPaneGateway(t *testing.T, bin string, fake *herdrtest.Server, pane string, config map[string]any) (*gatewayProc, *gatewaytest.Conn) {
	t.Helper()
	dir := gatewaytest.TempDir(t)
	cfg, _ := json.Marshal(config)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	gp := startGatewayProc(t, bin, dir)
	c, _, _, err := gateway.Dial(dir, gateway.Request{Op: "register", Name: "w", Role: "worker", PaneID: pane})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	return gp, procConn(t, gp, "lead", "primary")
}

func sortedValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}
