package gateway_test

import (
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// TestDelayShownOff: on the RabbitMQ here (no delayed-message plugin)
// doctor and stats say bridge.delay is off and why; doctor does not count
// it against the gateway (it is optional).
func TestDelayShownOff(t *testing.T) {
	g := gatewaytest.StartHost(t, gatewaytest.UniqueHost("dl"), brokerURL(t))
	const want = "bridge.delay: off (no x-delayed-message on this broker)"
	var c gateway.Check
	gatewaytest.Eventually(t, 10*time.Second, "the probe answered", func() bool { // it runs beside the connect
		c = check(doctor(g), "broker delay")
		return !strings.Contains(c.Detail, "not probed yet")
	})
	if c.Status != gateway.CheckOK || !strings.HasPrefix(c.Detail, want) {
		t.Fatalf("doctor's broker delay check: %+v", c)
	}
	r, err := gateway.Ask(g.StateDir(), gateway.Request{Op: "stats"})
	if err != nil || r.Stats == nil {
		t.Fatalf("stats: %v %+v", err, r)
	}
	if r.Stats.Delay != want {
		t.Fatalf("stats delay %q, want %q", r.Stats.Delay, want)
	}
}
