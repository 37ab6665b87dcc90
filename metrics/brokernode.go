package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/herdbridge/herdbridge/bridge/broker"
)

// brokerNode is herdbridge_broker_connected_info: one series naming the
// broker node the gateway is connected to (or was last) and its cluster,
// 1 while connected, else 0. The node changes on a failover, so the
// series is built at each scrape instead of kept: no stale node lingers.
type brokerNode struct {
	desc   *prometheus.Desc
	server func() broker.ServerInfo
	up     func() bool
}

func newBrokerNode(server func() broker.ServerInfo, up func() bool) *brokerNode {
	return &brokerNode{server: server, up: up, desc: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "broker", "connected_info"),
		"The broker node this gateway is connected to (host:port, no credentials) and the cluster_name it reports: 1 while connected, else 0 (the node last connected to).",
		[]string{"node", "cluster"}, nil)}
}

func (b *brokerNode) Describe(ch chan<- *prometheus.Desc) { ch <- b.desc }

func (b *brokerNode) Collect(ch chan<- prometheus.Metric) {
	s := b.server()
	if s.Node == "" {
		return // never connected
	}
	v := 0.0
	if b.up == nil || b.up() {
		v = 1
	}
	ch <- prometheus.MustNewConstMetric(b.desc, prometheus.GaugeValue, v, s.Node, s.ClusterName)
}
