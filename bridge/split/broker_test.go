package split_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker"
	"github.com/herdbridge/herdbridge/bridge/broker/brokertest"
	"github.com/herdbridge/herdbridge/bridge/split"
	"github.com/herdbridge/herdbridge/bridge/transporttest"
)

func openBroker(t *testing.T) *broker.Transport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	tr, err := broker.Open(ctx, broker.Options{URL: brokertest.URL(t), Heartbeat: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestConformanceOnBroker: the split transport over a real RabbitMQ passes
// the conformance suite (with CI set and no broker, it fails).
func TestConformanceOnBroker(t *testing.T) {
	brokertest.URL(t)
	var paths sync.Map // transport -> its local file
	newAt := func(t *testing.T, path string) bridge.Transport {
		tr := open(t, path, openBroker(t), split.Options{})
		paths.Store(tr, path)
		return tr
	}
	transporttest.Run(t, transporttest.Factory{
		New: func(t *testing.T) bridge.Transport { return newAt(t, filepath.Join(t.TempDir(), "local.db")) },
		Reopen: func(t *testing.T, old bridge.Transport) bridge.Transport {
			path, _ := paths.Load(old)
			old.Close()
			return newAt(t, path.(string))
		},
		Peer:    func(t *testing.T, _ bridge.Transport) bridge.Transport { return openBroker(t) },
		Timeout: 10 * time.Second,
		Grace:   400 * time.Millisecond,
	})
}
