package mcp

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// The HTTP endpoints' answers to requests they refuse: a JSON body that
// says what to do, and for authentication the RFC 6750 challenge. No OAuth
// is offered: tokens come from `herdbridge register`, so nothing under
// /.well-known/ exists and a client is never sent to an authorization
// server.

// bearerToken is the token of an Authorization header, the scheme matched
// without regard to case (RFC 6750 §2.1, RFC 9110 §11.1); "" when the
// header is absent, of another scheme, or carries no token.
func bearerToken(h string) string {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// howToConnect is the way to a token, told by every 401.
const howToConnect = "get a token with `herdbridge register --name NAME --role primary|worker|orchestrator` " +
	"(it prints the token and the URL) and send it as `Authorization: Bearer <token>`; " +
	"or run `herdbridge mcp --name NAME --role ROLE` as a stdio MCP server, which needs no token"

// unauthorized answers a request without a usable token. A request with no
// token at all gets a bare challenge: RFC 6750 §3.1 says a request that
// lacks any authentication information SHOULD NOT get an error code. A
// token that is unknown or revoked gets error="invalid_token", which tells
// a client (the MCP Inspector, the TypeScript SDK) that the token it holds
// was refused rather than that it should start an OAuth login.
func unauthorized(w http.ResponseWriter, invalid bool) {
	challenge := `Bearer realm="herdbridge"`
	body := map[string]string{"error": "missing_token",
		"message": "this endpoint needs a bearer token: send Authorization: Bearer <token>", "fix": howToConnect}
	if invalid {
		challenge += `, error="invalid_token", error_description="the token is unknown or was revoked"`
		body = map[string]string{"error": "invalid_token",
			"message": "the bearer token is unknown or was revoked: register again for a new one", "fix": howToConnect}
	}
	w.Header().Set("WWW-Authenticate", challenge)
	writeJSON(w, http.StatusUnauthorized, body)
}

// noOAuth answers every /.well-known/ path: 404, so no client discovers an
// OAuth authorization server or protected-resource metadata here.
func noOAuth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusNotFound, map[string]string{"error": "not_found",
		"message": "herdbridge offers no OAuth: it authenticates with bearer tokens from `herdbridge register`", "fix": howToConnect})
}

// LocalOnly guards every HTTP path against DNS rebinding, before anything
// else (authentication included): a web page elsewhere, or one that
// rebinds its DNS name to 127.0.0.1, must not drive a local agent's MCP
// session, read /metrics or reach the operator page. Two checks:
//
//   - Host: on a connection to a loopback address, the Host header must be
//     a loopback name (localhost, 127.0.0.1 or any loopback IP, [::1]; any
//     port), or the request gets 421 — a rebound page sends its own name.
//     A connection to another address exists only with TLS (a non-loopback
//     --listen needs a certificate), where a rebound name fails the
//     browser's certificate check first.
//   - Origin: anything but a loopback origin gets 403 (MCP spec,
//     transports: "Servers MUST validate the Origin header"). Clients that
//     are not browsers send no Origin and pass.
func LocalOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if loopbackConn(r) && !loopbackHost(r.Host) {
			writeJSON(w, http.StatusMisdirectedRequest, map[string]string{"error": "forbidden_host",
				"message": fmt.Sprintf("Host %q is not a loopback name: herdbridge answers on this address only to localhost, 127.0.0.1 or [::1] "+
					"(any port), which protects it against DNS rebinding", r.Host),
				"fix": "connect to http://127.0.0.1:PORT or http://localhost:PORT (the URL `herdbridge register` prints)"})
			return
		}
		for _, o := range r.Header.Values("Origin") {
			if o != "" && !loopbackOrigin(o) {
				writeJSON(w, http.StatusForbidden, map[string]string{"error": "forbidden_origin",
					"message": "Origin " + o + " is not a loopback origin: herdbridge serves MCP only to local clients " +
						"(no Origin, or http(s)://localhost, 127.0.0.1 or [::1] on any port), which protects it against DNS rebinding"})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// loopbackConn: the request came in on a connection to a loopback address
// (the server's side of it). Without the address (a handler called
// directly, not by net/http's server) it counts as loopback: checked.
func loopbackConn(r *http.Request) bool {
	a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || a == nil {
		return true
	}
	ap, err := netip.ParseAddrPort(a.String())
	return err != nil || ap.Addr().Unmap().IsLoopback()
}

// loopbackHost: a Host header naming localhost or a loopback IP, with or
// without a port, and nothing more.
func loopbackHost(h string) bool {
	host := h
	if hp, _, err := net.SplitHostPort(h); err == nil {
		host = hp
	} else if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		host = h[1 : len(h)-1]
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Zone() == "" && ip.Unmap().IsLoopback()
}

// loopbackOrigin: o is http(s)://localhost, a loopback IP, or [::1], on
// any port, and nothing more.
func loopbackOrigin(o string) bool {
	u, err := url.Parse(o)
	if err != nil || u.Opaque != "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return false
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Zone() == "" && ip.IsLoopback()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // the body is read by people: <token>, not \u003ctoken\u003e
	_ = enc.Encode(v)
}
