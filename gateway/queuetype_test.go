package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker"
	"github.com/herdbridge/herdbridge/bridge/broker/brokertest"
	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/herdr"
	"github.com/herdbridge/herdbridge/herdr/herdrtest"
)

// lockedBuffer is a log sink the test reads while the gateway writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// brokerQueues is `rabbitmqctl list_queues name type messages`: name ->
// "type messages".
func brokerQueues(t *testing.T) map[string]string {
	t.Helper()
	if os.Getenv("RABBITMQ_NODENAME") == "" {
		brokertest.Ctl(t, "status") // skips, or fails under CI
	}
	cmd := exec.Command("/usr/lib/rabbitmq/bin/rabbitmqctl", "-q", "list_queues", "--no-table-headers", "name", "type", "messages")
	cmd.Env = brokertest.CtlEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("rabbitmqctl list_queues: %v\n%s", err, out)
	}
	qs := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 3 {
			qs[f[0]] = f[1] + " " + f[2]
		}
	}
	return qs
}

// TestUpgradeClassicToQuorum is issue 22's "done when": a state dir and
// a broker from a classic deployment — an entity registered, messages
// held in its .v2 inbox and a SPAWN in control.<host> — upgraded by
// restarting the gateway with --queue-type quorum. Every held message
// reaches the entity once, in order, the SPAWN is carried out, the
// classic queues are gone, the .v3 ones are quorum queues, the log says
// what moved, and the state dir remembers quorum for the next start
// under auto.
func TestUpgradeClassicToQuorum(t *testing.T) {
	url := brokerURL(t)
	fake := herdrtest.New(t)
	fake.AddAgent(herdrtest.PaneOptions{Agent: "claude"})
	hostA, hostB, dirB := gatewaytest.UniqueHost("ua"), gatewaytest.UniqueHost("ub"), gatewaytest.TempDir(t)
	logB := &lockedBuffer{}
	inB := func(qtype string) func(*gateway.Config) {
		return func(c *gateway.Config) {
			c.StateDir, c.QueueType = dirB, qtype
			c.File.Herdr.Disabled, c.File.Herdr.Socket = false, fake.SocketPath()
			c.File.Profiles = map[string]herdr.Profile{"reviewer": {Kind: "claude"}}
			c.Logger = slog.New(slog.NewTextHandler(logB, &slog.HandlerOptions{Level: slog.LevelInfo}))
		}
	}
	ga := gatewaytest.StartHost(t, hostA, url, func(c *gateway.Config) {
		c.QueueType = "classic"
		c.Core.PresenceTTL = time.Minute // still sees B's entity and profiles while B is down
		c.Core.MaxWait = 40 * time.Second
	})
	gb := gatewaytest.StartHost(t, hostB, url, inB("classic"))
	lead := gatewaytest.RegisterOn(t, ga, "lead", bridge.RolePrimary)
	w := gatewaytest.RegisterOn(t, gb, "w", bridge.RoleWorker)
	target := "w@" + hostB
	gatewaytest.Eventually(t, 10*time.Second, "A sees w and B's profile", func() bool {
		_, err := ga.Core().Resolve(target)
		for _, h := range ga.Core().Roster().Hosts {
			if h.Host == hostB && len(h.Profiles) == 1 {
				return err == nil
			}
		}
		return false
	})
	gb.Close() // the classic deployment stops

	ctx := context.Background()
	const n = 20
	for i := range n {
		if _, err := ga.Core().Send(ctx, lead.GID, bridge.SendRequest{Target: target, Message: fmt.Sprint("held ", i)}, nil); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	spawned := make(chan *bridge.Result, 1)
	go func() {
		r, err := ga.Core().Spawn(ctx, lead.GID, bridge.SpawnRequest{Host: hostB, Profile: "reviewer", Name: "rev-up"})
		if err != nil {
			t.Errorf("spawn: %v", err)
		}
		spawned <- r
	}()
	inbox2, control2 := bridge.InboxQueueName(w.GID), broker.ControlQueue(hostB)
	gatewaytest.Eventually(t, 10*time.Second, "the messages held in the classic queues", func() bool {
		qs := brokerQueues(t)
		return qs[inbox2] == fmt.Sprintf("classic %d", n) && qs[control2] == "classic 1"
	})

	gb = gatewaytest.StartHost(t, hostB, url, inB("quorum")) // the upgrade
	var got []string
	for deadline := time.Now().Add(20 * time.Second); len(got) < n && time.Now().Before(deadline); {
		r, err := gb.Core().Poll(ctx, w.GID, bridge.PollRequest{Max: 100, Wait: time.Second}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range r.Messages {
			got = append(got, m.Body)
		}
	}
	if r, _ := gb.Core().Poll(ctx, w.GID, bridge.PollRequest{Max: 100, Wait: 500 * time.Millisecond}, nil); r != nil {
		for _, m := range r.Messages {
			got = append(got, m.Body)
		}
	}
	var want []string
	for i := range n {
		want = append(want, fmt.Sprint("held ", i))
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("w got %q, want every held message once, in order", got)
	}
	select {
	case r := <-spawned:
		if r == nil || r.Status != bridge.StatusConfirmed || !strings.Contains(r.Reason, "worker ready") {
			t.Errorf("the held SPAWN: %+v", r)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("the held SPAWN was never carried out")
	}
	inbox3, control3 := broker.InboxQueue(w.GID, broker.QueueTypeQuorum), broker.ControlQueueOf(hostB, broker.QueueTypeQuorum)
	gatewaytest.Eventually(t, 10*time.Second, "the classic queues gone, the quorum ones there", func() bool {
		qs := brokerQueues(t)
		_, old1 := qs[inbox2]
		_, old2 := qs[control2]
		return !old1 && !old2 && strings.HasPrefix(qs[inbox3], "quorum ") && strings.HasPrefix(qs[control3], "quorum ")
	})
	logs := logB.String()
	for _, line := range []string{`"inbox migrated classic->quorum"`, `"control queue migrated classic->quorum"`} {
		if !strings.Contains(logs, line) {
			t.Errorf("no log line %s", line)
		}
	}
	if !strings.Contains(logs, "queue="+inbox3+" moved="+fmt.Sprint(n)) || !strings.Contains(logs, "queue="+control3+" moved=1") {
		t.Errorf("the migration's counts are not logged as moved=%d and moved=1:\n%s", n, grepLines(logs, "migrat"))
	}
	var mem broker.QueueTypeChoice
	if b, err := os.ReadFile(filepath.Join(dirB, gateway.QueueTypeName)); err != nil || json.Unmarshal(b, &mem) != nil || mem.Type != "quorum" {
		t.Errorf("remembered queue type: %+v %v", mem, err)
	}
	if d := gb.DoctorReport(ctx).Broker; d.QueueType.Type != "quorum" {
		t.Errorf("doctor's queue type: %+v", d.QueueType)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestQueueTypeAutoRemembered: under auto a gateway on one broker URI
// uses classic queues and remembers it; a later start with quorum asked
// explicitly switches and remembers quorum, and the start after it under
// auto stays quorum (the memory, not the URI count, decides).
func TestQueueTypeAutoRemembered(t *testing.T) {
	url := brokerURL(t)
	host, dir := gatewaytest.UniqueHost("qa"), gatewaytest.TempDir(t)
	for _, step := range []struct{ asked, want, why string }{
		{"", "classic", "1 broker URI"},
		{"quorum", "quorum", "configured"},
		{"auto", "quorum", "remembered"},
	} {
		cfg := gatewaytest.HostConfig(t, host, url)
		cfg.StateDir, cfg.QueueType = dir, step.asked
		gatewaytest.JoinTrustMesh(t, dir, host)
		g, err := gateway.Open(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		qt := g.DoctorReport(context.Background()).Broker.QueueType
		st := gateway.StatsOf(g)
		g.Close()
		if st.QueueType == nil || *st.QueueType != qt {
			t.Errorf("asked %q: stats say %+v, doctor %+v", step.asked, st.QueueType, qt)
		}
		if qt.Type != step.want || !strings.Contains(qt.Why, step.why) {
			t.Errorf("asked %q: %+v, want %s (%s)", step.asked, qt, step.want, step.why)
		}
	}
}
