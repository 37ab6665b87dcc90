package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/herdbridge/herdbridge/bridge/broker"
)

// registerSources registers the totals kept elsewhere (the broker link,
// the audit log), read at scrape time.
func registerSources(reg *prometheus.Registry, o Options) {
	if o.AuditDropped != nil {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: Namespace, Name: "audit_dropped_records_total",
			Help: "Audit log records lost to a full queue or a failing disk."},
			func() float64 { return float64(o.AuditDropped()) }))
	}
	if o.Broker == nil {
		return
	}
	counter := func(name, help string, read func() uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "broker", Name: name, Help: help},
			func() float64 { return float64(read()) })
	}
	// one series per kind of queue: the same name and help, a constant label
	delivered := func(queue string, read func(broker.Counts) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "broker", Name: "deliveries_total",
			Help:        "Deliveries the broker pushed to this gateway's consumers, by queue (presence: roster.<host>, control: control.<host>, inbox: entities' inboxes, dead_letter: bridge.dlq); summed over every gateway, what the broker delivered.",
			ConstLabels: prometheus.Labels{"queue": queue}},
			func() float64 { return float64(read(o.Broker())) })
	}
	reg.MustRegister(
		counter("publishes_total", "basic.publish frames sent to the broker (a publish retried after a lost link counts again).",
			func() uint64 { return o.Broker().Publishes }),
		counter("confirms_total", "Publishes the broker confirmed.", func() uint64 { return o.Broker().Confirms }),
		counter("nacks_total", "Publishes the broker refused (an inbox at its cap).", func() uint64 { return o.Broker().Nacks }),
		counter("returns_total", "Mandatory publishes the broker returned unroutable.", func() uint64 { return o.Broker().Returns }),
		counter("reconnects_total", "Broker connections re-established after a loss.", func() uint64 { return o.Broker().Reconnects }),
		counter("publish_channel_rotations_total", "Publish channels replaced because a quorum inbox below its cap kept refusing them (a channel following a dead leader).",
			func() uint64 { return o.Broker().Rotations }),
		delivered("presence", func(c broker.Counts) uint64 { return c.PresenceDeliveries }),
		delivered("control", func(c broker.Counts) uint64 { return c.ControlDeliveries }),
		delivered("inbox", func(c broker.Counts) uint64 { return c.InboxDeliveries }),
		delivered("dead_letter", func(c broker.Counts) uint64 { return c.DeadLetterDeliveries }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: "broker", Name: "unconfirmed",
			Help: "Publishes awaiting their broker confirm now: the confirm window concurrent sends share."},
			func() float64 { return float64(o.Broker().Unconfirmed) }),
	)
	if o.BrokerServer != nil {
		reg.MustRegister(newBrokerNode(o.BrokerServer, o.BrokerUp))
	}
	if o.BrokerUp != nil {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: "broker", Name: "connected",
			Help: "1 while the broker connection is up, else 0."},
			func() float64 {
				if o.BrokerUp() {
					return 1
				}
				return 0
			}))
	}
}
