package gateway_test

import (
	"context"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// deadBrokerURL is an AMQP URL of a port nothing listens on.
func deadBrokerURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "amqp://guest:guest@" + addr + "/"
}

// TestGatewaySeveralBrokerNodes: a gateway given two nodes, one of them
// down, connects to the live one and names it in stats, doctor and
// /metrics; configured as config.json's brokers list, the command line
// unset.
func TestGatewaySeveralBrokerNodes(t *testing.T) {
	live := brokerURL(t)
	u, err := url.Parse(live)
	if err != nil {
		t.Fatal(err)
	}
	node := u.Host
	dead := deadBrokerURL(t)
	g := gatewaytest.StartHost(t, gatewaytest.UniqueHost("nodes"), "", func(c *gateway.Config) {
		c.Broker, c.File.Brokers = "", []string{dead, live}
	})
	r, err := gateway.Ask(g.StateDir(), gateway.Request{Op: "stats"})
	if err != nil {
		t.Fatal(err)
	}
	b := r.Stats.Broker
	if b == nil || !b.Connected || b.Node != node || len(b.Nodes) != 2 || b.ClusterName == "" {
		t.Fatalf("stats broker %+v, want connected to %s of 2 nodes, with the cluster name", b, node)
	}
	res := gateway.Doctor(context.Background(), gateway.DoctorOptions{StateDir: g.StateDir()})
	if c := check(res, "broker node"); c.Status != gateway.CheckOK || !strings.Contains(c.Detail, node) || !strings.Contains(c.Detail, "one of 2 nodes") {
		t.Fatalf("doctor broker node: %+v", c)
	}
	_, tok := gatewaytest.Register(t, g, "lead", "primary")
	f := scrapeGateway(t, g, tok)
	if v := metricValue(f, "herdbridge_broker_connected_info", "node", node, "cluster", b.ClusterName); v != 1 {
		t.Fatalf("herdbridge_broker_connected_info{node=%s} = %v", node, v)
	}
	// gateway down: doctor probes each node of --broker
	res = gateway.Doctor(context.Background(), gateway.DoctorOptions{StateDir: t.TempDir(), Broker: dead + "," + live, Timeout: 10 * time.Second})
	if c := check(res, "broker"); c.Status != gateway.CheckWarn || !strings.Contains(c.Detail, "1 of 2 nodes reachable") {
		t.Fatalf("doctor --broker dead,live: %+v", c)
	}
}

// TestGatewayRejectsABadBrokerURI: every node's URI is checked before any
// dial, and the error names the bad one without its password.
func TestGatewayRejectsABadBrokerURI(t *testing.T) {
	cfg := gatewaytest.HostConfig(t, gatewaytest.UniqueHost("baduri"), "amqp://guest:guest@127.0.0.1:1/,http://user:secret@mq2/")
	_, err := gateway.Open(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "http://…@mq2/") || strings.Contains(err.Error(), "secret") {
		t.Fatalf("bad URI: %v", err)
	}
}
