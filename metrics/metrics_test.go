package metrics_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker"
	"github.com/herdbridge/herdbridge/metrics"
)

// fakeCore is a roster of n local entities, entity i holding i messages,
// the even ones but the first in panes with a brief queued, and a brief
// in flight to each.
type fakeCore struct {
	v        bridge.RosterView
	inFlight map[string]int
}

func newFakeCore(n int) *fakeCore {
	c := &fakeCore{v: bridge.RosterView{Hosts: []bridge.HostView{{Host: "h1", Local: true}, {Host: "h2"}}}, inFlight: map[string]int{}}
	for i := range n {
		e := bridge.EntityView{Entity: bridge.Entity{GID: fmt.Sprintf("gid-%04d", i), Name: fmt.Sprintf("e%04d", i), Host: "h1", Role: bridge.RoleWorker},
			Held: i, Status: "online"}
		if i%2 == 0 && i > 0 {
			e.PaneID, e.Queued, e.Status = fmt.Sprintf("w1:p%d", i), 1, "working"
		}
		c.v.Entities = append(c.v.Entities, e)
		c.inFlight[e.GID] = 1
	}
	c.v.Entities = append(c.v.Entities, bridge.EntityView{Entity: bridge.Entity{GID: "remote", Name: "far", Host: "h2"}, Status: "online"})
	return c
}

func (c *fakeCore) Roster() bridge.RosterView      { return c.v }
func (c *fakeCore) BriefsInFlight() map[string]int { return c.inFlight }

// scrape serves m's handler once and parses it as Prometheus text.
func scrape(t testing.TB, m *metrics.Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("scrape: %d %s", rec.Code, rec.Body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return fams
}

// value is the value of the series of name with exactly labels (a
// histogram's sample count), or -1 when there is none.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	f := fams[name]
	if f == nil {
		return -1
	}
	for _, m := range f.Metric {
		if !hasLabels(m, labels) {
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
	return -1
}

func hasLabels(m *dto.Metric, kv []string) bool {
	if len(m.Label) != len(kv)/2 {
		return false
	}
	for i := 0; i < len(kv); i += 2 {
		found := false
		for _, l := range m.Label {
			if l.GetName() == kv[i] && l.GetValue() == kv[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// TestEventsCounted: each hop counts under its closed labels; what a
// sender wrote (an unknown kind, a dead-letter reason) never becomes a
// label of its own.
func TestEventsCounted(t *testing.T) {
	m := metrics.New(metrics.Options{Core: newFakeCore(0)})
	at := time.Now()
	for _, e := range []bridge.Event{
		{Hop: bridge.HopPublish, Kind: bridge.KindSend, Status: "published"},
		{Hop: bridge.HopPublish, Kind: bridge.KindSend, Status: "spooled: the broker is unreachable"},
		{Hop: bridge.HopPublish, Kind: bridge.KindReply, Status: "publish failed: boom"},
		{Hop: bridge.HopPublish, Kind: bridge.KindFailed, Status: bridge.StatusNoticeUnroutable + ": bridge: no inbox bound to that key"},
		{Hop: bridge.HopRefuse, Kind: "EVIL\n{}", Status: bridge.RefuseToMismatch},
		{Hop: bridge.HopRefuse, Kind: bridge.KindSend, Status: "a reason nobody wrote"},
		{Hop: bridge.HopDeadLetter, Kind: bridge.KindSend, Status: "rejected: refused: to-mismatch"},
		{Hop: bridge.HopDeadLetter, Status: "x-death says <script>"},
		{Hop: bridge.HopInject, Kind: bridge.KindSend, Status: bridge.StatusSubmitted, Latency: 300 * time.Millisecond},
		{Hop: bridge.HopDrain, Kind: bridge.KindReply, Status: "drained", Latency: 2 * time.Second, At: at},
	} {
		m.Observe(e)
	}
	f := scrape(t, m)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"herdbridge_messages_total", []string{"hop", "publish", "kind", "SEND", "outcome", "published"}, 1},
		{"herdbridge_messages_total", []string{"hop", "publish", "kind", "SEND", "outcome", "spooled"}, 1},
		{"herdbridge_messages_total", []string{"hop", "publish", "kind", "REPLY", "outcome", "failed"}, 1},
		{"herdbridge_messages_total", []string{"hop", "refuse", "kind", "other", "outcome", "refused"}, 1},
		{"herdbridge_messages_total", []string{"hop", "deadletter", "kind", "none", "outcome", "deadlettered"}, 1},
		{"herdbridge_messages_total", []string{"hop", "inject", "kind", "SEND", "outcome", "submitted"}, 1},
		{"herdbridge_messages_total", []string{"hop", "publish", "kind", "FAILED", "outcome", "failed"}, 1},
		{"herdbridge_notices_unroutable_total", []string{"kind", "FAILED"}, 1},
		{"herdbridge_refusals_total", []string{"reason", "to-mismatch"}, 1},
		{"herdbridge_refusals_total", []string{"reason", "other"}, 1},
		{"herdbridge_dead_letters_total", []string{"reason", "rejected"}, 1},
		{"herdbridge_dead_letters_total", []string{"reason", "other"}, 1},
		{"herdbridge_inject_duration_seconds", []string{"rung", "submitted"}, 1},
		{"herdbridge_delivery_latency_seconds", []string{"hop", "drain"}, 1},
	} {
		if got := value(f, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	for _, want := range []string{"go_goroutines", "process_cpu_seconds_total"} {
		if f[want] == nil {
			t.Errorf("no %s: the Go runtime and process collectors are missing", want)
		}
	}
}

// TestReplyLatency: a SEND's receipt and first REPLY, and an ASK's ANSWER,
// are timed from the publish on this gateway's clock; a second reply is
// not; a reply in another conversation is not.
func TestReplyLatency(t *testing.T) {
	m := metrics.New(metrics.Options{Core: newFakeCore(0)})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m.Observe(bridge.Event{At: t0, Hop: bridge.HopPublish, Kind: bridge.KindSend, MsgID: "s1", TraceID: "tr1", From: "lead", To: "w", Status: "published"})
	m.Observe(bridge.Event{At: t0, Hop: bridge.HopPublish, Kind: bridge.KindAsk, MsgID: "a1", TraceID: "tr2", From: "w", To: "lead", Status: "published"})
	m.Observe(bridge.Event{At: t0.Add(2 * time.Second), Hop: bridge.HopAccept, Kind: bridge.KindInjected, Corr: "s1", From: "gw", To: "lead", Status: "accepted"})
	m.Observe(bridge.Event{At: t0.Add(90 * time.Second), Hop: bridge.HopAccept, Kind: bridge.KindReply, TraceID: "tr1", From: "w", To: "lead", Status: "accepted"})
	m.Observe(bridge.Event{At: t0.Add(95 * time.Second), Hop: bridge.HopAccept, Kind: bridge.KindReply, TraceID: "tr1", From: "w", To: "lead", Status: "accepted"})
	m.Observe(bridge.Event{At: t0.Add(5 * time.Second), Hop: bridge.HopAccept, Kind: bridge.KindReply, TraceID: "other", From: "w", To: "lead", Status: "accepted"})
	m.Observe(bridge.Event{At: t0.Add(30 * time.Second), Hop: bridge.HopAccept, Kind: bridge.KindAnswer, Corr: "a1", From: "lead", To: "w", Status: "accepted"})
	f := scrape(t, m)
	sum := func(name string, labels ...string) (uint64, float64) {
		for _, x := range f[name].GetMetric() {
			if hasLabels(x, labels) {
				return x.Histogram.GetSampleCount(), x.Histogram.GetSampleSum()
			}
		}
		return 0, 0
	}
	if n, s := sum("herdbridge_reply_latency_seconds", "kind", "reply"); n != 1 || s != 90 {
		t.Errorf("reply latency: %d samples, sum %v; want 1, 90", n, s)
	}
	if n, s := sum("herdbridge_reply_latency_seconds", "kind", "answer"); n != 1 || s != 30 {
		t.Errorf("answer latency: %d samples, sum %v; want 1, 30", n, s)
	}
	if n, s := sum("herdbridge_receipt_latency_seconds", "kind", "INJECTED"); n != 1 || s != 2 {
		t.Errorf("receipt latency: %d samples, sum %v; want 1, 2", n, s)
	}
}

// TestPendingBounded: past PendingReplies, the oldest sends are forgotten
// (their replies go unmeasured) instead of memory growing.
func TestPendingBounded(t *testing.T) {
	m := metrics.New(metrics.Options{Core: newFakeCore(0), PendingReplies: 4})
	t0 := time.Now()
	for i := range 10 { // each SEND takes two slots: its receipt and its reply
		m.Observe(bridge.Event{At: t0, Hop: bridge.HopPublish, Kind: bridge.KindSend, MsgID: fmt.Sprint("s", i), TraceID: fmt.Sprint("t", i), From: "a", To: "b", Status: "published"})
	}
	for i := range 10 {
		m.Observe(bridge.Event{At: t0.Add(time.Second), Hop: bridge.HopAccept, Kind: bridge.KindReply, TraceID: fmt.Sprint("t", i), From: "b", To: "a", Status: "accepted"})
	}
	if got := value(scrape(t, m), "herdbridge_reply_latency_seconds", "kind", "reply"); got != 2 {
		t.Fatalf("%v replies measured, want the last 2 sends' only", got)
	}
}

// TestEntityCardinalityCapped: with more busy entities than MaxEntities,
// the busiest are named and the rest summed under "_other"; entities
// holding nothing are not named at all.
func TestEntityCardinalityCapped(t *testing.T) {
	core := newFakeCore(50) // e0000 holds nothing; e0049 holds 49
	m := metrics.New(metrics.Options{Core: core, MaxEntities: 10, Depths: func() map[string]int { return map[string]int{"gid-0049": 3} }})
	f := scrape(t, m)
	if n := len(f["herdbridge_entity_held_messages"].GetMetric()); n != 11 {
		t.Fatalf("%d held series, want 10 named + _other", n)
	}
	if got := value(f, "herdbridge_entity_held_messages", "entity", "e0049"); got != 49 {
		t.Errorf("busiest entity held %v, want 49", got)
	}
	if got := value(f, "herdbridge_entity_held_messages", "entity", "e0039"); got != -1 {
		t.Errorf("e0039 (11th busiest) named: %v", got)
	}
	want := 0 // 1..39: the ones past the 10 busiest, e0000 holds nothing
	for i := 1; i <= 39; i++ {
		want += i
	}
	if got := value(f, "herdbridge_entity_held_messages", "entity", metrics.Other); got != float64(want) {
		t.Errorf("_other held %v, want %d", got, want)
	}
	if got := value(f, "herdbridge_metrics_entities_folded"); got != 39 {
		t.Errorf("folded %v, want 39", got)
	}
	if got := value(f, "herdbridge_entity_inbox_messages", "entity", "e0049"); got != 3 {
		t.Errorf("inbox depth %v, want 3", got)
	}
	if got := value(f, "herdbridge_pane_queued_briefs", "entity", "e0048", "pane", "w1:p48"); got != 1 {
		t.Errorf("pane queue %v, want 1", got)
	}
	if n := len(f["herdbridge_briefs_in_flight"].GetMetric()); n != 11 {
		t.Errorf("%d in-flight series, want 10 named + _other", n)
	}
	if got := value(f, "herdbridge_entities", "status", "working"); got != 24 {
		t.Errorf("working entities %v, want 24", got)
	}
	if got := value(f, "herdbridge_presence_hosts"); got != 1 {
		t.Errorf("presence hosts %v, want 1", got)
	}
	if got := value(f, "herdbridge_presence_entities"); got != 1 {
		t.Errorf("presence entities %v, want 1", got)
	}
}

// TestSources: the broker's and the audit log's totals are read at scrape
// time.
func TestSources(t *testing.T) {
	c := broker.Counts{Publishes: 5, Confirms: 4, Nacks: 1, Returns: 2, Reconnects: 3, Unconfirmed: 6,
		PresenceDeliveries: 8, ControlDeliveries: 9, InboxDeliveries: 10, DeadLetterDeliveries: 11}
	server := func() broker.ServerInfo { return broker.ServerInfo{Node: "mq2:5672", ClusterName: "rabbit@mq1"} }
	m := metrics.New(metrics.Options{Core: newFakeCore(0), Broker: func() broker.Counts { return c }, BrokerUp: func() bool { return true },
		BrokerServer: server, AuditDropped: func() uint64 { return 7 }})
	f := scrape(t, m)
	if got := value(f, "herdbridge_broker_connected_info", "node", "mq2:5672", "cluster", "rabbit@mq1"); got != 1 {
		t.Errorf("herdbridge_broker_connected_info{node=mq2:5672,cluster=rabbit@mq1} = %v, want 1", got)
	}
	for name, want := range map[string]float64{"herdbridge_broker_publishes_total": 5, "herdbridge_broker_confirms_total": 4,
		"herdbridge_broker_nacks_total": 1, "herdbridge_broker_returns_total": 2, "herdbridge_broker_reconnects_total": 3,
		"herdbridge_broker_connected": 1, "herdbridge_broker_unconfirmed": 6, "herdbridge_audit_dropped_records_total": 7} {
		if got := value(f, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	for queue, want := range map[string]float64{"presence": 8, "control": 9, "inbox": 10, "dead_letter": 11} {
		if got := value(f, "herdbridge_broker_deliveries_total", "queue", queue); got != want {
			t.Errorf("herdbridge_broker_deliveries_total{queue=%s} = %v, want %v", queue, got, want)
		}
	}
}

// BenchmarkScrape is the cost of one scrape with 1,000 busy entities (the
// default cap of 100 named, the rest folded), the roster read included.
func BenchmarkScrape(b *testing.B) {
	m := metrics.New(metrics.Options{Core: newFakeCore(1000)})
	req := httptest.NewRequest("GET", "/metrics", nil)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, req)
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), "herdbridge_entity_held_messages") {
			b.Fatal(rec.Code)
		}
	}
}
