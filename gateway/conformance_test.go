package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// The MCP conformance of the HTTP endpoints: the 401 challenge, the bearer
// scheme in any case, Origin validation, and no OAuth discovery.

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// rawRequest sends one request and returns the response with its body read.
func rawRequest(t *testing.T, method, url string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if method == "POST" {
		body = strings.NewReader(initBody)
	}
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp, string(raw)
}

// jsonBody decodes a refusal's JSON body and checks it says what to do.
func jsonBody(t *testing.T, what string, resp *http.Response, body string) map[string]string {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s: Content-Type %q, want JSON", what, ct)
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("%s: body %q is not a JSON object of strings: %v", what, body, err)
	}
	return m
}

// TestUnauthorizedChallenge: a request with no token gets 401 with a bare
// Bearer challenge (RFC 6750 §3.1: no error code when no credentials were
// sent); a wrong token gets error="invalid_token"; both bodies say how to
// get a token. On every authenticated endpoint.
func TestUnauthorizedChallenge(t *testing.T) {
	g := gatewaytest.StartLocal(t, "")
	gatewaytest.Register(t, g, "lead", "primary")
	for _, path := range []string{"/mcp", "/sse", "/message"} {
		for _, c := range []struct {
			auth, challenge, code string
		}{
			{"", `Bearer realm="herdbridge"`, "missing_token"},
			{"Basic dXNlcjpwdw==", `Bearer realm="herdbridge"`, "missing_token"},
			{"Bearer", `Bearer realm="herdbridge"`, "missing_token"},
			{"Bearer hb_nope", `Bearer realm="herdbridge", error="invalid_token", error_description="the token is unknown or was revoked"`, "invalid_token"},
			{"bearer hb_nope", `Bearer realm="herdbridge", error="invalid_token", error_description="the token is unknown or was revoked"`, "invalid_token"},
		} {
			hdr := map[string]string{}
			if c.auth != "" {
				hdr["Authorization"] = c.auth
			}
			resp, body := rawRequest(t, "POST", g.URL()+path, hdr)
			what := path + " with " + c.auth
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s: %d, want 401", what, resp.StatusCode)
				continue
			}
			if got := resp.Header.Get("WWW-Authenticate"); got != c.challenge {
				t.Errorf("%s: WWW-Authenticate %q, want %q", what, got, c.challenge)
			}
			m := jsonBody(t, what, resp, body)
			if m["error"] != c.code || !strings.Contains(m["fix"], "herdbridge register") || !strings.Contains(m["fix"], "herdbridge mcp") {
				t.Errorf("%s: body %s", what, body)
			}
		}
	}
}

// TestBearerSchemeAnyCase: RFC 6750's scheme is case-insensitive; a client
// that writes "bearer" connects and calls tools.
func TestBearerSchemeAnyCase(t *testing.T) {
	g := gatewaytest.StartLocal(t, "")
	_, tok := gatewaytest.Register(t, g, "lead", "primary")
	for _, scheme := range []string{"Bearer", "bearer", "BEARER", "bEaReR"} {
		resp, body := rawRequest(t, "POST", g.URL()+"/mcp", map[string]string{"Authorization": scheme + " " + tok})
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d %s", scheme, resp.StatusCode, body)
		}
	}
	c, err := client.NewStreamableHttpClient(g.URL()+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "bearer " + tok}))
	if err != nil {
		t.Fatal(err)
	}
	cn := gatewaytest.NewConn(t, "lead", c)
	cn.MustStatus("bridge_poll", map[string]any{"wait_s": 0, "max": 5}, "empty")
}

// TestOriginValidated: every HTTP endpoint refuses a non-loopback Origin
// with 403 and a body saying why (DNS rebinding), before authentication;
// no Origin, or a loopback one on any port, is served.
func TestOriginValidated(t *testing.T) {
	g := gatewaytest.StartLocal(t, "")
	_, tok := gatewaytest.Register(t, g, "lead", "primary")
	bad := []string{"https://evil.example", "http://localhost.evil.example:7077", "http://127.0.0.1.nip.io", "null",
		"http://192.168.1.10:7077", "file://", "chrome-extension://abcdef", "http://[::1]x", "http://user@localhost"}
	for _, path := range []string{"/mcp", "/sse", "/message", "/healthz", "/.well-known/oauth-protected-resource"} {
		for _, method := range []string{"GET", "POST"} {
			for _, o := range bad {
				resp, body := rawRequest(t, method, g.URL()+path, map[string]string{"Origin": o, "Authorization": "Bearer " + tok})
				what := method + " " + path + " from " + o
				if resp.StatusCode != http.StatusForbidden {
					t.Errorf("%s: %d, want 403", what, resp.StatusCode)
					continue
				}
				m := jsonBody(t, what, resp, body)
				if m["error"] != "forbidden_origin" || !strings.Contains(m["message"], "DNS rebinding") {
					t.Errorf("%s: body %s", what, body)
				}
			}
		}
	}
	for _, o := range []string{"", "http://localhost:6274", "http://LOCALHOST", "https://127.0.0.1:8443", "http://[::1]:3000", "http://127.0.0.2"} {
		hdr := map[string]string{"Authorization": "Bearer " + tok}
		if o != "" {
			hdr["Origin"] = o
		}
		if resp, body := rawRequest(t, "POST", g.URL()+"/mcp", hdr); resp.StatusCode != http.StatusOK {
			t.Errorf("POST /mcp from %q: %d %s", o, resp.StatusCode, body)
		}
		if resp, body := rawRequest(t, "GET", g.URL()+"/healthz", hdr); resp.StatusCode != http.StatusOK {
			t.Errorf("GET /healthz from %q: %d %s", o, resp.StatusCode, body)
		}
	}
}

// TestNoOAuthDiscovery: nothing under /.well-known/ exists, so a client
// never finds an authorization server to send its user to.
func TestNoOAuthDiscovery(t *testing.T) {
	g := gatewaytest.StartLocal(t, "")
	for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp",
		"/.well-known/oauth-authorization-server", "/.well-known/oauth-authorization-server/mcp", "/.well-known/openid-configuration"} {
		resp, body := rawRequest(t, "GET", g.URL()+path, nil)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", path, resp.StatusCode)
			continue
		}
		if m := jsonBody(t, path, resp, body); !strings.Contains(m["message"], "no OAuth") {
			t.Errorf("%s: body %s", path, body)
		}
	}
}
