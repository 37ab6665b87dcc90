package broker_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker"
	"github.com/herdbridge/herdbridge/bridge/transporttest"
)

// brokerURL is the test broker (RMQ_URL, as .ci/rmq.sh exports it). With CI
// set and no broker, the tests fail: integration tests never skip in CI.
func brokerURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv("RMQ_URL")
	if url == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("RMQ_URL is not set: CI must start a broker (.ci/rmq.sh) before the tests")
		}
		t.Skip("no broker: set RMQ_URL (source .ci/rmq.sh and run rmq_start) to run the AMQP tests")
	}
	return url
}

func open(t testing.TB) *broker.Transport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	tr, err := broker.Open(ctx, broker.Options{URL: brokerURL(t), Heartbeat: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestConformance(t *testing.T) {
	brokerURL(t)
	transporttest.Run(t, transporttest.Factory{
		New: func(t *testing.T) bridge.Transport { return open(t) },
		Reopen: func(t *testing.T, old bridge.Transport) bridge.Transport {
			old.Close()
			return open(t)
		},
		Timeout: 10 * time.Second,
		Grace:   400 * time.Millisecond,
	})
}
