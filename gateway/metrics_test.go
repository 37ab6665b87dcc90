package gateway_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/herdr/herdrtest"
)

// getMetrics GETs /metrics with token ("": none) and returns the status
// and the body.
func getMetrics(t testing.TB, g *gateway.Gateway, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", g.URL()+"/metrics", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// scrapeGateway reads g's /metrics with token and parses it with the
// Prometheus text parser.
func scrapeGateway(t testing.TB, g *gateway.Gateway, token string) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := getMetrics(t, g, token)
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

// metricValue is the value of the series name{labels} (a histogram's
// sample count); 0 when absent.
func metricValue(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	for _, m := range fams[name].GetMetric() {
		if len(m.Label) != len(labels)/2 {
			continue
		}
		match := true
		for i := 0; i < len(labels); i += 2 {
			found := false
			for _, l := range m.Label {
				found = found || l.GetName() == labels[i] && l.GetValue() == labels[i+1]
			}
			match = match && found
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return 0
}

// TestMetricsEndpoint: /metrics needs an entity's token, parses as
// Prometheus text, and its counters move with a brief typed into a pane
// (fake herdr), the worker's reply held and drained by a poll, and a
// forged message refused and dead-lettered.
func TestMetricsEndpoint(t *testing.T) {
	fake := herdrtest.New(t)
	pane := fake.AddAgent(herdrtest.PaneOptions{Agent: "claude"})
	g := startHerdrGateway(t, fake, nil)
	leadGID, tok := gatewaytest.Register(t, g, "lead", "primary")
	if code, _ := getMetrics(t, g, ""); code != http.StatusUnauthorized {
		t.Fatalf("/metrics without a token: %d, want 401", code)
	}
	if code, _ := getMetrics(t, g, "hb_not-a-token"); code != http.StatusUnauthorized {
		t.Fatalf("/metrics with a bad token: %d, want 401", code)
	}
	scrape := func() map[string]*dto.MetricFamily { return scrapeGateway(t, g, tok) }
	moved := func(what, name string, want float64, labels ...string) {
		t.Helper()
		gatewaytest.Eventually(t, 10*time.Second, what, func() bool { return metricValue(scrape(), name, labels...) == want })
	}
	f := scrape()
	if f["go_goroutines"] == nil || f["process_resident_memory_bytes"] == nil {
		t.Fatal("no Go runtime or process metrics")
	}
	lead := gatewaytest.TokenConn(t, g.URL(), "lead", tok)
	w := gatewaytest.PaneConn(t, g, "w", "worker", pane)

	// a send, typed into the worker's pane
	lead.MustStatus("bridge_send", map[string]any{"target": "w", "message": "build it"}, "submitted")
	moved("the send published", "herdbridge_messages_total", 1, "hop", "publish", "kind", "SEND", "outcome", "published")
	moved("the inject timed", "herdbridge_inject_duration_seconds", 1, "rung", "submitted")
	moved("the receipt timed", "herdbridge_receipt_latency_seconds", 1, "kind", "INJECTED")

	// the reply, held for the lead, then drained by its poll
	w.MustStatus("bridge_send", map[string]any{"target": "lead", "message": "built"}, "confirmed")
	moved("the reply held", "herdbridge_entity_held_messages", 1, "entity", "lead")
	moved("the reply timed against the send", "herdbridge_reply_latency_seconds", 1, "kind", "reply")
	lead.MustStatus("bridge_poll", map[string]any{}, "drained")
	gatewaytest.RosterOK(lead) // the session's next request: evidence the client has the result, so it is acked
	moved("the poll drained it", "herdbridge_messages_total", 1, "hop", "drain", "kind", "REPLY", "outcome", "drained")
	moved("nothing held", "herdbridge_entity_held_messages", 0, "entity", "lead")

	// a message whose to is not the inbox it came to: refused, rejected
	// into the dead-letter queue, consumed from there
	now := time.Now()
	forged := &bridge.Envelope{V: 1, Kind: bridge.KindReply, MsgID: uuid.NewString(), TraceID: uuid.NewString(), From: uuid.NewString(), To: uuid.NewString(),
		Host: g.Host(), TS: now, ExpiresAt: now.Add(time.Hour), Body: []byte("x")}
	if err := g.Transport().Publish(context.Background(), leadGID, forged, true); err != nil {
		t.Fatal(err)
	}
	moved("the refusal counted", "herdbridge_refusals_total", 1, "reason", bridge.RefuseToMismatch)
	moved("the dead letter counted", "herdbridge_dead_letters_total", 1, "reason", bridge.ReasonRejected)
	f = scrape()
	entities := 0.0
	for _, m := range f["herdbridge_entities"].GetMetric() {
		entities += m.Gauge.GetValue()
	}
	if entities != 2 {
		t.Errorf("herdbridge_entities sums to %v, want 2 (lead and w)", entities)
	}
	if got := metricValue(f, "herdbridge_audit_dropped_records_total"); got != 0 {
		t.Errorf("audit drops %v", got)
	}
}

// BenchmarkMetricsScrape is the cost of one /metrics scrape (over HTTP,
// the roster read, every collector) on a gateway with 1,000 entities,
// each holding a brief: the default cap names 100, folds 900.
func BenchmarkMetricsScrape(b *testing.B) {
	cfg := gatewaytest.LocalConfig(b, "")
	cfg.NoSync = true
	cfg.Core.SweepEvery, cfg.Core.NudgeEvery = 0, 0 // the defaults: the tests' fast loops over 1,000 entities would be what is measured
	g := gatewaytest.Start(b, cfg)
	ctx := context.Background()
	lead, tok := gatewaytest.Register(b, g, "lead", "primary")
	for i := range 1000 {
		name := "w" + strconv.Itoa(i)
		gatewaytest.RegisterOn(b, g, name, bridge.RoleWorker)
		if _, err := g.Core().Send(ctx, lead, bridge.SendRequest{Target: name, Message: "brief"}, nil); err != nil {
			b.Fatal(err)
		}
	}
	gatewaytest.Eventually(b, 30*time.Second, "1,000 briefs held", func() bool {
		return metricValue(scrapeGateway(b, g, tok), "herdbridge_metrics_entities_folded") == 900
	})
	b.ReportAllocs()
	cpu0, n := processCPU(), 0
	for b.Loop() {
		if code, _ := getMetrics(b, g, tok); code != http.StatusOK {
			b.Fatal(code)
		}
		n++
	}
	// CPU, not wall time: on a shared machine the wall time is mostly
	// waiting for a core (this process's CPU includes the client's side)
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/1000/float64(n), "cpu-ms/op")
}

// processCPU is the CPU time this process used so far (user + system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestMetricsAcrossHosts: on a broker, /metrics reports the link (its
// publishes and confirms, connected), the other host's presence, and the
// latency of a reply that crossed hosts, timed on the sender's gateway.
func TestMetricsAcrossHosts(t *testing.T) {
	hostA, hostB := gatewaytest.UniqueHost("ma"), gatewaytest.UniqueHost("mb")
	ga := gatewaytest.StartHost(t, hostA, brokerURL(t))
	gb := gatewaytest.StartHost(t, hostB, brokerURL(t))
	_, tok := gatewaytest.Register(t, ga, "lead", "primary")
	lead := gatewaytest.TokenConn(t, ga.URL(), "lead", tok)
	w := gatewaytest.StdioConn(t, gb, "worker-b", "worker")
	gatewaytest.Eventually(t, 10*time.Second, "host A sees worker-b", func() bool {
		_, err := ga.Core().Resolve("worker-b@" + hostB)
		return err == nil
	})
	gatewaytest.Eventually(t, 10*time.Second, "host B sees lead", func() bool {
		_, err := gb.Core().Resolve("lead@" + hostA)
		return err == nil
	})
	lead.MustStatus("bridge_send", map[string]any{"target": "worker-b@" + hostB, "message": "cross-host brief"}, "confirmed")
	waitPoll(t, w, "cross-host brief")
	w.MustStatus("bridge_send", map[string]any{"target": "lead@" + hostA, "message": "done"}, "confirmed")
	gatewaytest.Eventually(t, 10*time.Second, "the cross-host reply timed on A", func() bool {
		return metricValue(scrapeGateway(t, ga, tok), "herdbridge_reply_latency_seconds", "kind", "reply") == 1
	})
	f := scrapeGateway(t, ga, tok)
	if metricValue(f, "herdbridge_broker_connected") != 1 {
		t.Error("broker not reported connected")
	}
	if p, c := metricValue(f, "herdbridge_broker_publishes_total"), metricValue(f, "herdbridge_broker_confirms_total"); p < 2 || c < 2 {
		t.Errorf("broker publishes %v, confirms %v: want the brief and presence heartbeats at least", p, c)
	}
	if metricValue(f, "herdbridge_presence_hosts") < 1 || metricValue(f, "herdbridge_presence_entities") < 1 {
		t.Errorf("presence: %v hosts, %v entities; want host B and worker-b", metricValue(f, "herdbridge_presence_hosts"), metricValue(f, "herdbridge_presence_entities"))
	}
	if metricValue(f, "herdbridge_delivery_latency_seconds", "hop", "accept") < 1 {
		t.Error("the reply's arrival on A not timed")
	}
}

// TestMetricsMaxEntitiesFromConfig: the configuration file's
// metrics.maxEntities caps the entities /metrics names.
func TestMetricsMaxEntitiesFromConfig(t *testing.T) {
	cfg := gatewaytest.LocalConfig(t, "")
	path := cfg.StateDir + "/config.json"
	if err := os.WriteFile(path, []byte(`{"metrics": {"maxEntities": 1}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var err error
	if cfg.File, err = gateway.LoadFile(path, true); err != nil {
		t.Fatal(err)
	}
	cfg.File.Herdr.Disabled = true
	g := gatewaytest.Start(t, cfg)
	lead, tok := gatewaytest.Register(t, g, "lead", "primary")
	for _, name := range []string{"w1", "w2", "w3"} {
		gatewaytest.RegisterOn(t, g, name, bridge.RoleWorker)
		if _, err := g.Core().Send(context.Background(), lead, bridge.SendRequest{Target: name, Message: "brief"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	gatewaytest.Eventually(t, 10*time.Second, "two of three busy entities folded", func() bool {
		f := scrapeGateway(t, g, tok)
		return metricValue(f, "herdbridge_metrics_entities_folded") == 2 && metricValue(f, "herdbridge_entity_held_messages", "entity", "_other") == 2
	})
}
