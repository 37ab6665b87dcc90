package opsui_test

import (
	"encoding/json"
	"net/http"
	neturl "net/url"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge/broker/brokertest"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/opsui"
)

// TestPageShowsOtherHosts: across hosts on a real broker, the page of A
// lists B with its key fingerprint and when A last heard its heartbeat,
// the broker node it is connected to, and a message from B's worker shows in A's feed as name@B, without its
// body.
func TestPageShowsOtherHosts(t *testing.T) {
	url := brokertest.URL(t)
	hostA, hostB := gatewaytest.UniqueHost("uia"), gatewaytest.UniqueHost("uib")
	a := gatewaytest.StartHost(t, hostA, url)
	b := gatewaytest.StartHost(t, hostB, url)
	hc := operatorClient(t, a)
	feed := openFeed(t, hc, a.URL())

	var s opsui.Snapshot
	gatewaytest.Eventually(t, 15*time.Second, hostA+"'s page lists "+hostB+" with its key and last heartbeat", func() bool {
		res, body := get(t, hc, a.URL()+"/ui/api/snapshot")
		if res.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &s) != nil {
			return false
		}
		for _, h := range s.Hosts {
			if h.Host == hostB && strings.HasPrefix(h.Key, "SHA256:") && h.LastHeartbeat != nil {
				return true
			}
		}
		return false
	})
	if u, _ := neturl.Parse(url); s.Broker == nil || !s.Broker.Connected || s.Broker.Node != u.Host || s.Broker.ClusterName == "" {
		t.Fatalf("the page's broker %+v, want connected to %s with its cluster name", s.Broker, u.Host)
	}
	if local := s.Hosts[0]; local.Host != hostA || !local.Local || !strings.HasPrefix(local.Key, "SHA256:") {
		t.Fatalf("this host's row %+v", local)
	}
	for _, h := range s.Hosts {
		if h.LastHeartbeat != nil && (h.LastHeartbeat.After(time.Now().Add(time.Second)) || time.Since(*h.LastHeartbeat) > time.Minute) {
			t.Fatalf("%s last heard at %s", h.Host, h.LastHeartbeat)
		}
	}

	const body = "CROSS-HOST-BODY-MARKER-4d1e"
	gatewaytest.CrossHostSend(t, b, a, "builder", "lead", body)
	feed.until(t, "the brief from builder@"+hostB+" accepted on "+hostA, func(_ sseEvent, it opsui.Item) bool {
		return it.Hop == "accept" && it.FromName == "builder@"+hostB && it.ToName == "lead" && it.Host == hostB
	})
	if strings.Contains(feed.raw.String(), body) {
		t.Fatal("the feed carried a message body")
	}
}
