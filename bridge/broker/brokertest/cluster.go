package brokertest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Cluster is the 3-node test cluster .ci/rmq.sh's rmq_cluster_start runs
// beside the single node (RMQ_CLUSTER_URLS, RMQ_CLUSTER_DIR). Its methods
// run the script's functions, which keep every node's state in files
// under Dir, so a test can kill, restart and partition nodes.
type Cluster struct {
	URLs []string // node 1, 2, 3
	Dir  string
}

// ClusterOf is the test cluster; with CI set and none, the test fails
// (cluster tests never skip in CI).
func ClusterOf(t testing.TB) *Cluster {
	t.Helper()
	urls, dir := os.Getenv("RMQ_CLUSTER_URLS"), os.Getenv("RMQ_CLUSTER_DIR")
	if urls == "" || dir == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("RMQ_CLUSTER_URLS/RMQ_CLUSTER_DIR are not set: CI must start the cluster (.ci/rmq.sh rmq_cluster_start)")
		}
		t.Skip("no broker cluster: source .ci/rmq.sh and run rmq_cluster_start 5711 to run the cluster tests")
	}
	c := &Cluster{URLs: strings.Split(urls, ","), Dir: dir}
	if len(c.URLs) != 3 {
		t.Fatalf("RMQ_CLUSTER_URLS has %d URLs, want 3", len(c.URLs))
	}
	return c
}

// Kill kill -9s node n's VM (1-based).
func (c *Cluster) Kill(t testing.TB, n int) { c.run(t, "rmq_cluster_kill "+strconv.Itoa(n)) }

// KillNow sends SIGKILL to node n's VM and returns at once, without
// waiting for it to be gone (Kill waits, which lets the cluster elect new
// leaders first): for a test that must act in the first milliseconds.
// Kill, Restart or Repair reaps the node's wrapper afterwards.
func (c *Cluster) KillNow(t testing.TB, n int) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(c.Dir, "n"+strconv.Itoa(n), "rabbit.pid"))
	if err != nil {
		t.Fatalf("node %d's pid: %v", n, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatalf("node %d's pid file: %v", n, err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 node %d (pid %d): %v", n, pid, err)
	}
}

// Restart stops node n gracefully if it runs and starts it again; it
// returns once the node's application runs.
func (c *Cluster) Restart(t testing.TB, n int) { c.run(t, "rmq_cluster_restart "+strconv.Itoa(n)) }

// Partition cuts node n's distribution links to the other two nodes
// (nftables on loopback); clients keep reaching its AMQP port until
// pause_minority pauses it.
func (c *Cluster) Partition(t testing.TB, n int) { c.run(t, "rmq_cluster_partition "+strconv.Itoa(n)) }

// Heal removes a partition.
func (c *Cluster) Heal(t testing.TB) { c.run(t, "rmq_cluster_heal") }

// Repair heals any partition, starts every node that is down (or
// restarts one that did not resume after a heal: it says so in the test
// log) and waits until all three run in the cluster.
func (c *Cluster) Repair(t testing.TB) {
	t.Helper()
	if out := strings.TrimSpace(c.run(t, "rmq_cluster_repair")); out != "" {
		t.Logf("cluster repair: %s", out)
	}
}

// Ctl runs rabbitmqctl against node n and returns its output.
func (c *Cluster) Ctl(t testing.TB, n int, args ...string) string {
	t.Helper()
	out, err := c.TryCtl(n, args...)
	if err != nil {
		t.Fatalf("rabbitmqctl %s on node %d: %v\n%s", strings.Join(args, " "), n, err, out)
	}
	return out
}

// TryCtl is Ctl for a goroutine, or a node that may be down: the error
// is returned, not fatal.
func (c *Cluster) TryCtl(n int, args ...string) (string, error) {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = strconv.Quote(a)
	}
	return c.script("rmq_cluster_ctl " + strconv.Itoa(n) + " " + strings.Join(q, " "))
}

// NodeName is node n's Erlang node name (RMQ_CLUSTER_NODES).
func (c *Cluster) NodeName(n int) string {
	names := strings.Split(os.Getenv("RMQ_CLUSTER_NODES"), ",")
	if n < 1 || n > len(names) {
		return ""
	}
	return names[n-1]
}

// Port is node n's AMQP port.
func (c *Cluster) Port(n int) int {
	u := strings.TrimSuffix(c.URLs[n-1], "/")
	p, _ := strconv.Atoi(u[strings.LastIndex(u, ":")+1:])
	return p
}

// NodeOfPort is the node (1-based) whose AMQP port is port, or 0.
func (c *Cluster) NodeOfPort(port int) int {
	for n := 1; n <= 3; n++ {
		if c.Port(n) == port {
			return n
		}
	}
	return 0
}

func (c *Cluster) run(t testing.TB, fn string) string {
	t.Helper()
	start := time.Now()
	out, err := c.script(fn)
	if err != nil {
		t.Fatalf("%s: %v after %v\n%s", fn, err, time.Since(start).Round(time.Millisecond), out)
	}
	return out
}

// script runs one of .ci/rmq.sh's functions against this cluster.
func (c *Cluster) script(fn string) (string, error) {
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "..", ".ci", "rmq.sh")
	cmd := exec.Command("bash", "--norc", "--noprofile", "-c", ". "+strconv.Quote(script)+" && "+fn)
	cmd.Env = append(os.Environ(), "RMQ_CLUSTER_DIR="+c.Dir)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
