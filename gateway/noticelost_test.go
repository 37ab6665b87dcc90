package gateway_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// TestMetricsCountUnroutableNotice: a NO_WAITER whose asker has no inbox
// is counted on /metrics (herdbridge_notices_unroutable_total) and is in
// the dead-letter log `herdbridge dlq list` reads.
func TestMetricsCountUnroutableNotice(t *testing.T) {
	g := gatewaytest.Start(t, gatewaytest.LocalConfig(t, ""))
	_, tok := gatewaytest.Register(t, g, "lead", "primary")
	w := gatewaytest.RegisterOn(t, g, "w", bridge.RoleWorker)
	now := time.Now()
	ghost := uuid.NewString()
	ask := &bridge.Envelope{V: 1, Kind: bridge.KindAsk, MsgID: uuid.NewString(), TraceID: uuid.NewString(), TurnID: uuid.NewString(),
		From: ghost, To: w.GID, Host: g.Host(), TS: now, ExpiresAt: now.Add(time.Hour), Body: []byte("anyone there?")}
	if err := g.Transport().Publish(context.Background(), w.GID, ask, true); err != nil {
		t.Fatal(err)
	}
	gatewaytest.Eventually(t, 10*time.Second, "the unroutable NO_WAITER counted", func() bool {
		return metricValue(scrapeGateway(t, g, tok), "herdbridge_notices_unroutable_total", "kind", string(bridge.KindNoWaiter)) == 1
	})
	dls, err := g.Core().DeadLetters(10)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dls {
		if d.To == ghost && strings.HasPrefix(d.Reason, bridge.ReasonUnroutable) {
			return
		}
	}
	t.Fatalf("dead-letter log %+v has no unroutable notice to %s", dls, ghost)
}
