package broker_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge/broker"
	"github.com/herdbridge/herdbridge/bridge/broker/brokertest"
)

// lockedBuf is a log sink the transport's goroutines may write at once.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestReconnectToAnotherClusterIsLoud: a broker URI list whose nodes are
// not one cluster (a misconfiguration: the queues, and what they hold,
// are per cluster) is said out loud when the transport reconnects to a
// node of another cluster: an ERROR in the log and the mismatch in Link
// (stats, doctor). The other cluster is the test broker renamed while the
// connection is cut. Fails before clustercheck.go: the reconnect was one
// INFO "broker connected" line.
func TestReconnectToAnotherClusterIsLoud(t *testing.T) {
	p, url := brokertest.NewProxy(t, brokerURL(t))
	var logs lockedBuf
	tr, err := broker.Open(context.Background(), broker.Options{URL: url, Heartbeat: 2 * time.Second, QueueType: broker.QueueTypeClassic,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	first := tr.Link().ClusterName
	if first == "" {
		t.Fatal("the test broker reports no cluster_name")
	}
	t.Cleanup(func() { brokertest.Ctl(t, "set_cluster_name", first) })
	if tr.Link().ClusterMismatch != "" {
		t.Fatalf("a mismatch before any reconnect: %q", tr.Link().ClusterMismatch)
	}
	brokertest.Ctl(t, "set_cluster_name", first+"-other")
	p.Cut()
	deadline := time.Now().Add(15 * time.Second)
	for tr.Link().ClusterName != first+"-other" || !tr.Connected() {
		if time.Now().After(deadline) {
			t.Fatalf("not reconnected to the renamed broker: %+v", tr.Link())
		}
		time.Sleep(20 * time.Millisecond)
	}
	l := tr.Link()
	if !strings.Contains(l.ClusterMismatch, first) || !strings.Contains(l.ClusterMismatch, first+"-other") {
		t.Errorf("Link().ClusterMismatch = %q, want both cluster names", l.ClusterMismatch)
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "another cluster") {
		t.Errorf("no ERROR about another cluster in the log:\n%s", logs.String())
	}
}
