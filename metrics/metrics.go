// Package metrics is the gateway's Prometheus metrics, served at /metrics:
// what the core's Events say happened to messages (counters and latency
// histograms, fed as they happen), and what the core, the transport, the
// broker link and the audit log hold right now (read at scrape time). It is
// the one package that imports the Prometheus client; everything it reads
// is plain Go in the packages it observes.
//
// Every label set is bounded: kinds, hops, outcomes and reasons are
// closed sets (anything else is counted as "other"), and the per-entity
// gauges name at most MaxEntities entities — the ones holding the most —
// and sum the rest under entity="_other".
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker"
)

// Namespace prefixes every metric of the gateway's own.
const Namespace = "herdbridge"

// Core is what the metrics read of the bridge core at scrape time.
type Core interface {
	Roster() bridge.RosterView
	BriefsInFlight() map[string]int
}

// Options says where the scrape-time metrics come from. Only Core is
// required; a nil source leaves its metrics out.
type Options struct {
	Core Core
	// Depths counts the messages stored in each inbox of the embedded
	// transport, by gid.
	Depths func() map[string]int
	// Broker reads the broker link's totals; BrokerUp whether it is
	// connected now. nil: no broker (the embedded transport alone).
	Broker   func() broker.Counts
	BrokerUp func() bool
	// BrokerServer names the broker node connected to and its cluster
	// (herdbridge_broker_connected_info).
	BrokerServer func() broker.ServerInfo
	// AuditDropped is how many audit records were lost.
	AuditDropped func() uint64
	// MaxEntities caps the entities named in per-entity labels (default
	// DefaultMaxEntities); the rest are summed under entity="_other".
	MaxEntities int
	// PendingReplies caps the sends and asks remembered until their reply
	// or answer arrives, for the reply latency (default DefaultPendingReplies).
	PendingReplies int
}

// Defaults of Options.
const (
	DefaultMaxEntities    = 100
	DefaultPendingReplies = 16384
)

// Metrics is the gateway's registry: an Observer of the core's Events and
// the /metrics handler.
type Metrics struct {
	reg *prometheus.Registry
	ev  *eventMetrics
}

// New registers every metric on a private registry (the process-wide
// default one would mix in whatever else the binary links).
func New(o Options) *Metrics {
	if o.MaxEntities <= 0 {
		o.MaxEntities = DefaultMaxEntities
	}
	if o.PendingReplies <= 0 {
		o.PendingReplies = DefaultPendingReplies
	}
	reg := prometheus.NewRegistry()
	m := &Metrics{reg: reg, ev: newEventMetrics(o.PendingReplies)}
	m.ev.register(reg)
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&rosterCollector{o: o},
	)
	registerSources(reg, o)
	return m
}

// Observe implements bridge.Observer: it counts e. It never blocks (the
// core calls it under its locks) beyond the counters' own short locks.
func (m *Metrics) Observe(e bridge.Event) { m.ev.observe(e) }

// Handler serves the registry in the Prometheus text format (or
// OpenMetrics, when the scraper asks for it).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{EnableOpenMetrics: true, ErrorHandling: promhttp.ContinueOnError})
}

// Gatherer is the registry, for tests and benchmarks.
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.reg }
