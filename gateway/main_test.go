package gateway_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/herdbridge/herdbridge/bridge/broker/brokertest"
)

// TestMain fails the package if a goroutine outlives the tests: every one
// a gateway starts must end with Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func brokerURL(t testing.TB) string { return brokertest.URL(t) }
