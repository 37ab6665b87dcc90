package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/cliout"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// TestTraceCommand: `herdbridge trace` prints one line per hop of a brief
// and its reply (names, hops, latency since the previous hop), --json the
// same timeline for scripts; an id nobody saw fails with where it looked;
// a bad command line is a usage error.
func TestTraceCommand(t *testing.T) {
	dir := gatewaytest.TempDir(t)
	g := gatewaytest.StartLocal(t, dir)
	ctx := context.Background()
	lead := gatewaytest.RegisterOn(t, g, "lead", bridge.RolePrimary)
	w := gatewaytest.RegisterOn(t, g, "w", bridge.RoleWorker)
	brief, err := g.Core().Send(ctx, lead.GID, bridge.SendRequest{Target: "w", Message: "trace me"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	gatewaytest.WaitHeld(t, g, "w", 1) // held, then drained: every hop
	if r, err := g.Core().Poll(ctx, w.GID, bridge.PollRequest{}, nil); err != nil || len(r.Messages) != 1 {
		t.Fatalf("worker poll: %+v %v", r, err)
	}

	out, _, err := cli("trace", brief.TraceID, "--state-dir", dir)
	if err != nil {
		t.Fatalf("trace: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 6 || !strings.HasPrefix(lines[0], "trace "+brief.TraceID+": 4 hops on 1 host(s)") || !strings.Contains(lines[1], "+SINCE PREV") {
		t.Fatalf("output:\n%s", out)
	}
	for i, hop := range []string{"publish", "accept", "hold", "drain"} {
		l := lines[i+2]
		if !strings.Contains(l, " "+hop+" ") || !strings.Contains(l, "lead@testhost → w@testhost") || !strings.Contains(l, brief.MsgID[:8]) {
			t.Errorf("hop %d: %q", i, l)
		}
		if (i == 0) != strings.HasSuffix(l, " -") {
			t.Errorf("hop %d: since the previous hop: %q", i, l)
		}
	}

	out, _, err = cli("trace", brief.MsgID, "--json", "--state-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	var j cliout.TraceOut
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(j.Hops) != 4 || j.Hops[3].Hop != bridge.HopDrain || j.Hops[3].Seen != "testhost" || j.Hops[3].SinceMs == nil ||
		len(j.Hosts) != 1 || !j.Hosts[0].Scope.Whole || j.Names[w.GID] != "w@testhost" {
		t.Fatalf("json: %s", out)
	}

	out, _, err = cli("trace", uuid.NewString(), "--state-dir", dir)
	var u *usageError
	if err == nil || errors.As(err, &u) || !strings.Contains(err.Error(), "no hops found for") || !strings.Contains(err.Error(), "searched testhost (its whole audit log, audit.log)") || out != "" {
		t.Fatalf("unknown id: %v (output %q)", err, out)
	}
	if _, _, err := cli("trace", "nope", "--state-dir", dir); err == nil || !strings.Contains(err.Error(), "not a traceId or msgId") {
		t.Fatalf("bad id: %v", err)
	}
	for _, args := range [][]string{{"trace"}, {"trace", "a", "b"}, {"trace", brief.TraceID, "--wait", "0s"}, {"trace", brief.TraceID, "--wait", "1m"}} {
		if _, _, err := cli(append(args, "--state-dir", dir)...); !errors.As(err, &u) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
}
