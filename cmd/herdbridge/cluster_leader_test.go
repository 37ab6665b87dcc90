package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge/broker"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// queueState is one queue's row of list_queues: its leader, members and
// the members online.
type queueState struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Leader   string `json:"leader"`
	Online   any    `json:"online"`  // a list on quorum queues, "" on classic ones
	Members  any    `json:"members"` // likewise
	Messages int    `json:"messages"`
}

// queueStates lists every queue as node n sees it.
func (cr *clusterRun) queueStates(n int) ([]queueState, error) {
	out, err := cr.c.TryCtl(n, "list_queues", "name", "type", "leader", "online", "members", "messages", "--formatter", "json")
	if err != nil {
		return nil, fmt.Errorf("list_queues on node %d: %v: %s", n, err, out)
	}
	var qs []queueState
	if i := strings.Index(out, "["); i >= 0 {
		out = out[i:]
	}
	if err := json.Unmarshal([]byte(out), &qs); err != nil {
		return nil, fmt.Errorf("list_queues on node %d: %v: %s", n, err, out)
	}
	return qs, nil
}

// leadQueue is R's primary's quorum inbox.
func (cr *clusterRun) leadQueue() string {
	return broker.InboxQueue(cr.leadGID, broker.QueueTypeQuorum)
}

// leaderNode is the node (1-based) leading q, as node n sees it, or 0.
func (cr *clusterRun) leaderNode(t *testing.T, n int, q string) int {
	t.Helper()
	qs, err := cr.queueStates(n)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range qs {
		if s.Name == q {
			return cr.nodeOfName(s.Leader)
		}
	}
	return 0
}

// nodeOfName is the node (1-based) whose Erlang name is name, or 0.
func (cr *clusterRun) nodeOfName(name string) int {
	for n := 1; n <= 3; n++ {
		if cr.c.NodeName(n) == name {
			return n
		}
	}
	return 0
}

// moveLeader makes node to the leader of quorum queue q (ra's leadership
// transfer: 3.10's CLI has no command for it), so a test can put the
// worst node under its fault whatever node the shuffled dials chose.
func (cr *clusterRun) moveLeader(t *testing.T, q string, to int) {
	t.Helper()
	from := cr.leaderNode(t, to, q)
	if from == to {
		return
	}
	server := func(n int) string { return fmt.Sprintf("{'%%2F_%s', '%s'}", q, cr.c.NodeName(n)) }
	expr := fmt.Sprintf("ra:transfer_leadership(%s, %s).", server(from), server(to))
	t.Logf("moving %s's leader from node %d to node %d: %s", q, from, to, strings.TrimSpace(cr.c.Ctl(t, to, "eval", expr)))
	gatewaytest.Eventually(t, 30*time.Second, "the leader moved", func() bool { return cr.leaderNode(t, to, q) == to })
}

// watchQueues logs, once a second until stop, how node n sees R's
// primary's inbox (its leader, the members online, its depth) and how
// many other queues miss a member: what S's publishes meet during a fault.
func (cr *clusterRun) watchQueues(t *testing.T, n int, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(time.Second):
		}
		qs, err := cr.queueStates(n)
		if err != nil {
			t.Log(err)
			continue
		}
		lead, missing := "not listed", 0
		for _, s := range qs {
			if s.Name == cr.leadQueue() {
				lead = fmt.Sprintf("leader %s, online %d/%d, %d messages", s.Leader, count(s.Online), count(s.Members), s.Messages)
			} else if count(s.Online) < count(s.Members) {
				missing++
			}
		}
		t.Logf("from node %d: R's primary's inbox: %s; %d other quorum queues miss a member", n, lead, missing)
	}
}

// count is the length of a list_queues list field (0 for "").
func count(v any) int {
	l, _ := v.([]any)
	return len(l)
}
