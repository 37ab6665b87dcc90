package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// guardedPaths is every HTTP path of the gateway, with the method a
// client uses on it: each must refuse a foreign Host and a foreign Origin
// before anything else, and serve loopback names as before.
var guardedPaths = []struct{ method, path string }{
	{"POST", "/mcp"}, {"GET", "/mcp"}, {"GET", "/sse"}, {"POST", "/message"}, {"GET", "/metrics"},
	{"GET", "/healthz"}, {"GET", "/ui"}, {"GET", "/ui/login"}, {"GET", "/ui/api/snapshot"},
	{"GET", "/ui/api/events"}, {"GET", "/ui/app.js"}, {"GET", "/.well-known/oauth-protected-resource"},
}

// guardAnswer is one response: its status and, for a refusal (a short
// body), the JSON fields. A stream that is served is not read.
type guardAnswer struct {
	status int
	body   map[string]string
	raw    string
}

func guardRequest(t *testing.T, g *gateway.Gateway, method, path, host string, hdr map[string]string) guardAnswer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var body io.Reader
	if method == "POST" {
		body = strings.NewReader(initBody)
	}
	req, err := http.NewRequestWithContext(ctx, method, g.URL()+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s Host %q: %v", method, path, host, err)
	}
	defer resp.Body.Close()
	a := guardAnswer{status: resp.StatusCode}
	if resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusMisdirectedRequest {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
		a.raw = string(raw)
		_ = json.Unmarshal(raw, &a.body)
	}
	return a
}

// TestForeignHostRefusedOnEveryPath: DNS rebinding makes a browser send a
// page's own name as Host to 127.0.0.1. Every path refuses such a Host
// with 421 and a sentence naming it, before authentication — /metrics
// and /ui included, with a valid token and whatever Origin.
func TestForeignHostRefusedOnEveryPath(t *testing.T) {
	g := gatewaytest.StartLocal(t, "")
	_, tok := gatewaytest.Register(t, g, "lead", "primary")
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(g.URL(), "http://"))
	for _, p := range guardedPaths {
		for _, host := range []string{"evil.example", "evil.example:" + port, "localhost.evil.example:" + port,
			"127.0.0.1.nip.io:" + port, "192.168.1.10:" + port, "attacker.localhost.example"} {
			a := guardRequest(t, g, p.method, p.path, host, map[string]string{"Authorization": "Bearer " + tok})
			what := p.method + " " + p.path + " Host " + host
			if a.status != http.StatusMisdirectedRequest {
				t.Errorf("%s: %d, want 421", what, a.status)
				continue
			}
			if a.body["error"] != "forbidden_host" || !strings.Contains(a.body["message"], host) || !strings.Contains(a.body["message"], "DNS rebinding") {
				t.Errorf("%s: body %s", what, a.raw)
			}
		}
	}
}

// TestForeignOriginRefusedOnEveryPath: a foreign Origin is a 403 on every
// path, /metrics and /ui included.
func TestForeignOriginRefusedOnEveryPath(t *testing.T) {
	g := gatewaytest.StartLocal(t, "")
	_, tok := gatewaytest.Register(t, g, "lead", "primary")
	for _, p := range guardedPaths {
		for _, o := range []string{"https://evil.example", "null", "http://localhost.evil.example"} {
			a := guardRequest(t, g, p.method, p.path, "", map[string]string{"Origin": o, "Authorization": "Bearer " + tok})
			what := p.method + " " + p.path + " Origin " + o
			if a.status != http.StatusForbidden || a.body["error"] != "forbidden_origin" {
				t.Errorf("%s: %d %s, want 403 forbidden_origin", what, a.status, a.raw)
			}
		}
	}
}

// TestLoopbackNamesServed: localhost, 127.0.0.1 and [::1], with or
// without the port and in any case, pass the guard on every path (what
// each path answers then is its own business: /ui without a session is a
// 401, /message without a session a 400).
func TestLoopbackNamesServed(t *testing.T) {
	g := gatewaytest.StartLocal(t, "")
	_, tok := gatewaytest.Register(t, g, "lead", "primary")
	u, _ := url.Parse(g.URL())
	port := u.Port()
	for _, p := range guardedPaths {
		for _, host := range []string{"localhost:" + port, "LocalHost:" + port, "127.0.0.1:" + port, "[::1]:" + port, "localhost", "127.0.0.1"} {
			a := guardRequest(t, g, p.method, p.path, host, map[string]string{"Authorization": "Bearer " + tok, "Origin": "http://" + host})
			if a.status == http.StatusMisdirectedRequest || a.status == http.StatusForbidden {
				t.Errorf("%s %s Host %s: %d %s, want served", p.method, p.path, host, a.status, a.raw)
			}
		}
	}
	for _, p := range []string{"/metrics", "/healthz"} {
		if a := guardRequest(t, g, "GET", p, "localhost:"+port, map[string]string{"Authorization": "Bearer " + tok}); a.status != http.StatusOK {
			t.Errorf("GET %s from localhost: %d, want 200", p, a.status)
		}
	}
}
