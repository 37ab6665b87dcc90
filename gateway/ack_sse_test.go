package gateway_test

import (
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// TestSSEAckRule: over SSE, whose results go out on the event stream after
// the call returned, a drained message is acked by the session's next
// request; a session whose stream closes without one gives its last
// result's messages back, flagged redelivered (main acked them when the
// call returned).
func TestSSEAckRule(t *testing.T) {
	g, lead, tok, worker := ackGateway(t, time.Minute)
	sseConn := func() *gatewaytest.Conn {
		tr, err := transport.NewSSE(g.URL()+"/sse", transport.WithHeaders(map[string]string{"Authorization": "Bearer " + tok}))
		if err != nil {
			t.Fatal(err)
		}
		return gatewaytest.NewConn(t, "lead", client.NewClient(tr, client.WithLegacyProtocolOnly()))
	}

	first := sseConn()
	sendTagged(t, g, worker, 2, 100)
	first.MustStatus("bridge_poll", map[string]any{"max": 10}, bridge.StatusDrained)
	if held, _ := g.Core().Held(lead); held.InFlight != 2 {
		t.Fatalf("the drained messages must be leased until the session's next request: %+v", held)
	}
	gatewaytest.RosterOK(first)
	if held, _ := g.Core().Held(lead); held.InFlight != 0 || held.Total != 0 {
		t.Fatalf("the session's next request must ack them: %+v", held)
	}

	second := sseConn()
	tags := sendTagged(t, g, worker, 3, 100)
	second.MustStatus("bridge_poll", map[string]any{"max": 10}, bridge.StatusDrained)
	second.Client.Close() // the stream ends with no further request
	gatewaytest.Eventually(t, 10*time.Second, "the unconfirmed messages held again", func() bool {
		held, _ := g.Core().Held(lead)
		return held.Total == 3
	})
	collect(t, newRawSession(t, g, tok), tags, true)
}
