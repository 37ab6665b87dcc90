package gateway

// /metrics on the HTTP listener: the Prometheus metrics of package
// metrics, fed by the core's Events and read from the core at scrape time.
// The listener's rules hold (loopback unless TLS is configured); reading
// needs a credential (readAuthorized).

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/metrics"
)

// MetricsConfig tunes /metrics (the configuration file's "metrics").
type MetricsConfig struct {
	// MaxEntities caps the entities named in per-entity labels (default
	// 100): those holding the most are named, the rest summed under
	// entity="_other", so a fleet of thousands of agents cannot blow up
	// the scraper's series count.
	MaxEntities int `json:"maxEntities,omitempty"`
}

// openMetrics builds the metrics on what open opened (the core is read
// through g at scrape time, so it may come later) and returns the observer
// the core tells its Events to: the metrics, and whatever Config.Core
// already named (the operator page's feed, tests).
func (g *Gateway) openMetrics(cfg *bridge.Config) {
	o := metrics.Options{Core: lateCore{g}, MaxEntities: g.cfg.File.Metrics.MaxEntities}
	if g.local != nil {
		o.Depths = g.local.Depths
	}
	if g.broker != nil {
		o.Broker, o.BrokerUp, o.BrokerServer = g.broker.Counts, g.broker.Connected, g.broker.Server
	}
	if g.audit != nil {
		o.AuditDropped = g.audit.Dropped
	}
	g.metrics = metrics.New(o)
	cfg.Observer = composeObservers(cfg.Observer, g.metrics)
}

// composeObservers is one Observer telling each non-nil one of os.
func composeObservers(os ...bridge.Observer) bridge.Observer {
	var all bridge.Observers
	for _, o := range os {
		if o != nil {
			all = append(all, o)
		}
	}
	if len(all) == 1 {
		return all[0]
	}
	return all
}

// lateCore is the core as the metrics read it: g.core, set after the
// metrics are built (the core needs their observer first).
type lateCore struct{ g *Gateway }

func (c lateCore) Roster() bridge.RosterView      { return c.g.core.Roster() }
func (c lateCore) BriefsInFlight() map[string]int { return c.g.core.BriefsInFlight() }

// withMetrics serves /metrics beside next (the MCP endpoints).
func (g *Gateway) withMetrics(next http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", g.readGuard(g.metrics.Handler()))
	mux.Handle("/", next)
	return mux
}

// readGuard lets through only requests readAuthorized accepts; others get
// 401 with a body that says what to send.
func (g *Gateway) readGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.readAuthorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="herdbridge"`)
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "unauthorized",
				"message": "reading this gateway's metrics needs a bearer token: send Authorization: Bearer <token>",
				"fix":     "use the token of any entity of this gateway (`herdbridge register --name metrics --role worker` prints one), or an operator credential"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// readAuthorized decides who may read the gateway's operator views
// (/metrics): anyone holding the bearer token of an entity of this
// gateway, or an operator credential when OperatorAuth is set. One
// function, so every read-only view asks the same question.
func (g *Gateway) readAuthorized(r *http.Request) bool {
	if tok := bearer(r.Header.Get("Authorization")); tok != "" {
		if _, ok := g.core.Authenticate(tok); ok {
			return true
		}
	}
	// the hook for an operator credential (a session of the operator
	// page, an operator token): nil until one is configured
	return g.operatorAuth != nil && g.operatorAuth(r)
}

// bearer is the token of an "Authorization: Bearer <token>" header.
func bearer(h string) string {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}
