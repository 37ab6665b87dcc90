package memnet_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/memnet"
	"github.com/herdbridge/herdbridge/bridge/transporttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// network returns a fresh network, closed with the test.
func network(t *testing.T) *memnet.Network {
	n := memnet.New(memnet.Options{})
	t.Cleanup(n.Close)
	return n
}

func TestConformance(t *testing.T) {
	transporttest.Run(t, transporttest.Factory{
		New: func(t *testing.T) bridge.Transport {
			return network(t).Connect()
		},
		Reopen: func(t *testing.T, old bridge.Transport) bridge.Transport {
			if err := old.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return old.(*memnet.Transport).Network().Connect()
		},
		Peer: func(t *testing.T, tr bridge.Transport) bridge.Transport {
			return tr.(*memnet.Transport).Network().Connect()
		},
		// delivery takes microseconds: a short watch for what must not
		// happen keeps the suite fast (a slow machine can only make such a
		// check pass, never fail)
		Grace:    100 * time.Millisecond,
		Parallel: true, // each subtest has its own network
	})
}
