package bridge_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// TestParseTraceRequest: the id must be a UUID (canonical form returned);
// anything else is refused.
func TestParseTraceRequest(t *testing.T) {
	r, err := bridge.ParseTraceRequest([]byte(`{"id":"3F1A0C9E-5B6D-4E7F-8A9B-0C1D2E3F4A5B"}`))
	if err != nil || r.ID != "3f1a0c9e-5b6d-4e7f-8a9b-0c1d2e3f4a5b" {
		t.Fatalf("%+v %v", r, err)
	}
	for _, bad := range []string{``, `null`, `{}`, `{"id":"x"}`, `{"id":1}`, `[]`, `{"id":"3f1a0c9e-5b6d-4e7f-8a9b-0c1d2e3f4a5b"} {}`,
		`{"id":"` + strings.Repeat("a", 5000) + `"}`} {
		if _, err := bridge.ParseTraceRequest([]byte(bad)); err == nil {
			t.Errorf("%.40q accepted", bad)
		}
	}
}

// TestParseTraceAnswer: an answer's hops are held to what this build
// writes (UUID ids, bounded UTF-8 text, a sane latency, at most
// TraceMaxHops), and its host comes from the envelope, never the body.
func TestParseTraceAnswer(t *testing.T) {
	good := bridge.TraceHost{Host: "forged", Hops: []bridge.AuditRecord{{At: time.Unix(1, 0).UTC(), Dir: "in", Hop: bridge.HopAccept, Kind: bridge.KindSend,
		MsgID: "3f1a0c9e-5b6d-4e7f-8a9b-0c1d2e3f4a5b", Verdict: "accepted", LatencyMs: 1.5}}, Scope: bridge.TraceScope{Files: []string{"audit.log"}, Bytes: 10, Whole: true}}
	raw, _ := json.Marshal(good)
	th, err := bridge.ParseTraceAnswer(raw)
	if err != nil || th.Host != "" || len(th.Hops) != 1 || th.Hops[0].LatencyMs != 1.5 || !th.Scope.Whole {
		t.Fatalf("%+v %v", th, err)
	}
	mut := func(f func(*bridge.TraceHost)) []byte {
		c := good
		c.Hops = append([]bridge.AuditRecord{}, good.Hops...)
		f(&c)
		b, _ := json.Marshal(c)
		return b
	}
	for name, bad := range map[string][]byte{
		"not json":    []byte(`{`),
		"bad msgId":   mut(func(c *bridge.TraceHost) { c.Hops[0].MsgID = "x" }),
		"bad corr":    mut(func(c *bridge.TraceHost) { c.Hops[0].Corr = "x" }),
		"long text":   mut(func(c *bridge.TraceHost) { c.Hops[0].Verdict = strings.Repeat("v", 2000) }),
		"negative ms": mut(func(c *bridge.TraceHost) { c.Hops[0].LatencyMs = -1 }),
		"many files":  mut(func(c *bridge.TraceHost) { c.Scope.Files = []string{"a", "b", "c"} }),
		"many hops": mut(func(c *bridge.TraceHost) {
			for len(c.Hops) <= bridge.TraceMaxHops {
				c.Hops = append(c.Hops, good.Hops[0])
			}
		}),
	} {
		if _, err := bridge.ParseTraceAnswer(bad); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzParseTraceRequest: a TRACE body from another host never panics, and
// what is accepted is a canonical UUID that parses again the same.
func FuzzParseTraceRequest(f *testing.F) {
	f.Add([]byte(`{"id":"3f1a0c9e-5b6d-4e7f-8a9b-0c1d2e3f4a5b"}`))
	f.Add([]byte(`{"id":"3F1A0C9E-5B6D-4E7F-8A9B-0C1D2E3F4A5B","x":[1,2]}`))
	f.Add([]byte(`{"id":null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := bridge.ParseTraceRequest(body)
		if err != nil {
			return
		}
		raw, _ := json.Marshal(r)
		again, err := bridge.ParseTraceRequest(raw)
		if err != nil || again != r || len(r.ID) != 36 || strings.ToLower(r.ID) != r.ID {
			t.Fatalf("%q -> %+v -> %+v %v", body, r, again, err)
		}
	})
}

// FuzzParseTraceAnswer: a TRACE_ANSWER body from another host never
// panics, and what is accepted stays within the bounds and parses again
// the same.
func FuzzParseTraceAnswer(f *testing.F) {
	f.Add([]byte(`{"hops":[{"at":"2026-01-02T03:04:05Z","dir":"in","hop":"accept","kind":"SEND","msgId":"3f1a0c9e-5b6d-4e7f-8a9b-0c1d2e3f4a5b","verdict":"accepted","latencyMs":2}],"scope":{"files":["audit.log"],"bytes":10,"whole":true}}`))
	f.Add([]byte(`{"hops":null,"error":"x"}`))
	f.Add([]byte(`{"hops":[{"latencyMs":1e300}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		th, err := bridge.ParseTraceAnswer(body)
		if err != nil {
			return
		}
		if th.Host != "" || th.Hops == nil || len(th.Hops) > bridge.TraceMaxHops {
			t.Fatalf("accepted %+v", th)
		}
		raw, _ := json.Marshal(th)
		again, err := bridge.ParseTraceAnswer(raw)
		if err != nil || !reflect.DeepEqual(again.Hops, th.Hops) && len(th.Hops) > 0 {
			t.Fatalf("%q -> %s: %v", body, raw, err)
		}
	})
}
