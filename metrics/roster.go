package metrics

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/herdbridge/herdbridge/bridge"
)

// Other is the entity label that sums the entities past MaxEntities.
const Other = "_other"

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", name), help, labels, nil)
}

var (
	descEntities = desc("entities", "Entities registered at this gateway, by status (online, detached, stale, or the herdr agent status of a pane: idle, working, blocked, done, unknown).", "status")
	descWaiting  = desc("entities_waiting", "Entities of this gateway with a call waiting for messages now.")
	descHeld     = desc("entity_held_messages", "Messages held for an entity to drain (bridge_poll), by entity; past the cap, summed under entity=\"_other\".", "entity")
	descInbox    = desc("entity_inbox_messages", "Messages stored in an entity's inbox on the embedded transport (not yet taken into the held set, or taken and not yet acked), by entity.", "entity")
	descQueued   = desc("pane_queued_briefs", "Briefs waiting to be typed into a worker's pane, by entity and pane.", "entity", "pane")
	descInFlight = desc("briefs_in_flight", "Briefs this gateway sent into workers' panes whose receipt (INJECTED or FAILED) has not come back, by target (name@host).", "target")
	descHosts    = desc("presence_hosts", "Other hosts whose gateways are present (heartbeats in the roster).")
	descRemote   = desc("presence_entities", "Entities of other hosts known from their gateways' presence.")
	descFolded   = desc("metrics_entities_folded", "Entities summed under entity=\"_other\" in the last scrape because more than the cap (metrics.maxEntities) hold something.")
)

// rosterCollector reads the core's roster (and the transport's inbox
// depths) at scrape time: gauges of what is held now, never a copy kept
// up to date on the message path.
type rosterCollector struct{ o Options }

func (c *rosterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descEntities, descWaiting, descHeld, descInbox, descQueued, descInFlight, descHosts, descRemote, descFolded} {
		ch <- d
	}
}

func (c *rosterCollector) Collect(ch chan<- prometheus.Metric) {
	v := c.o.Core.Roster()
	var local []bridge.EntityView
	names := map[string]string{} // gid -> name@host, for in-flight targets
	remote := 0
	for _, e := range v.Entities {
		names[e.GID] = e.Addr()
		if e.Host == v.Hosts[0].Host {
			local = append(local, e)
		} else {
			remote++
		}
	}
	gauge := func(d *prometheus.Desc, n float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, n, labels...)
	}
	gauge(descHosts, float64(len(v.Hosts)-1))
	gauge(descRemote, float64(remote))
	c.collectStatus(local, gauge)
	var depths map[string]int
	if c.o.Depths != nil {
		depths = c.o.Depths()
	}
	gauge(descFolded, float64(c.collectEntities(local, depths, gauge)))
	c.collectInFlight(names, gauge)
}

// statuses are the roster's entity statuses; anything else is "other".
var statuses = map[string]bool{"online": true, "detached": true, bridge.StatusStale: true,
	"idle": true, "working": true, "blocked": true, "done": true, "unknown": true}

func (c *rosterCollector) collectStatus(local []bridge.EntityView, gauge func(*prometheus.Desc, float64, ...string)) {
	by := map[string]int{}
	waiting := 0
	for _, e := range local {
		s := e.Status
		if !statuses[s] {
			s = "other"
		}
		by[s]++
		if e.Waiting {
			waiting++
		}
	}
	for s, n := range by {
		gauge(descEntities, float64(n), s)
	}
	gauge(descWaiting, float64(waiting))
}

// collectEntities reports held, inbox and queued per entity: the
// MaxEntities entities holding the most by name, the rest summed under
// Other. An entity holding nothing is not named (its series would only
// say 0). It returns how many were folded into Other.
func (c *rosterCollector) collectEntities(local []bridge.EntityView, depths map[string]int, gauge func(*prometheus.Desc, float64, ...string)) int {
	load := func(e bridge.EntityView) int { return e.Held + e.Queued + depths[e.GID] }
	busy := local[:0:0]
	for _, e := range local {
		if load(e) > 0 {
			busy = append(busy, e)
		}
	}
	sort.Slice(busy, func(i, j int) bool {
		li, lj := load(busy[i]), load(busy[j])
		return li > lj || li == lj && busy[i].Name < busy[j].Name
	})
	var held, inbox, queued int
	for i, e := range busy {
		if i < c.o.MaxEntities {
			gauge(descHeld, float64(e.Held), e.Name)
			if depths != nil {
				gauge(descInbox, float64(depths[e.GID]), e.Name)
			}
			if e.PaneID != "" {
				gauge(descQueued, float64(e.Queued), e.Name, e.PaneID)
			}
			continue
		}
		held, inbox, queued = held+e.Held, inbox+depths[e.GID], queued+e.Queued
	}
	folded := max(len(busy)-c.o.MaxEntities, 0)
	if folded > 0 {
		gauge(descHeld, float64(held), Other)
		if depths != nil {
			gauge(descInbox, float64(inbox), Other)
		}
		gauge(descQueued, float64(queued), Other, "")
	}
	return folded
}

// collectInFlight reports the briefs awaiting receipts by target, capped
// like the entities.
func (c *rosterCollector) collectInFlight(names map[string]string, gauge func(*prometheus.Desc, float64, ...string)) {
	type target struct {
		name string
		n    int
	}
	var ts []target
	for gid, n := range c.o.Core.BriefsInFlight() {
		name := names[gid]
		if name == "" {
			name = gid // gone from the roster; its receipt (or FAILED) is still due
		}
		ts = append(ts, target{name, n})
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].n > ts[j].n || ts[i].n == ts[j].n && ts[i].name < ts[j].name })
	rest := 0
	for i, t := range ts {
		if i < c.o.MaxEntities {
			gauge(descInFlight, float64(t.n), t.name)
		} else {
			rest += t.n
		}
	}
	if len(ts) > c.o.MaxEntities {
		gauge(descInFlight, float64(rest), Other)
	}
}
