// Package brokertest gives integration tests the test broker that
// .ci/rmq.sh starts: its URL, and rabbitmqctl against its node. With CI set
// and no broker, tests fail: integration tests never skip in CI.
package brokertest

import (
	"os"
	"os/exec"
	"testing"
)

// URL is the test broker's AMQP URL (RMQ_URL, as rmq_start exports it).
func URL(t testing.TB) string {
	t.Helper()
	url := os.Getenv("RMQ_URL")
	if url == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("RMQ_URL is not set: CI must start a broker (.ci/rmq.sh) before the tests")
		}
		t.Skip("no broker: set RMQ_URL (source .ci/rmq.sh and run rmq_start) to run the broker tests")
	}
	return url
}

// Ctl runs rabbitmqctl against the test broker's node (rmq_start exports
// the node's environment, cookie HOME included).
func Ctl(t testing.TB, args ...string) {
	t.Helper()
	if os.Getenv("RABBITMQ_NODENAME") == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("RABBITMQ_NODENAME is not set: CI must start the broker with .ci/rmq.sh")
		}
		t.Skip("no broker node environment (source .ci/rmq.sh and rmq_start)")
	}
	out, err := exec.Command("/usr/lib/rabbitmq/bin/rabbitmqctl", append([]string{"-q"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("rabbitmqctl %v: %v\n%s", args, err, out)
	}
}
