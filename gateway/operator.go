package gateway

// The operator page (/ui, package opsui): the gateway owns who counts as
// the operator — the one check below, which /metrics may accept too — and
// mints the one-time login links `herdbridge ui` asks for over the admin
// socket, whose peer is checked to run as the gateway's user. The page
// itself, its feed and its sessions live in opsui.

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/http"
	"net/url"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/opsui"
)

// operator reports whether r carries a live operator session (the cookie
// a one-time login link set). Every handler that serves the operator
// asks this, and nothing else.
func (g *Gateway) operator(r *http.Request) bool {
	c, err := r.Cookie(opsui.CookieName(g.addr))
	return err == nil && g.logins.Valid(c.Value)
}

// observers is what the core tells every hop of every message: the
// operator page's live feed, and an observer set in Config.Core.
func (g *Gateway) observers(cfg *bridge.Config) {
	g.feed = opsui.NewFeed(0, 0)
	g.logins = opsui.NewLogins(nil)
	if cfg.Observer != nil {
		cfg.Observer = bridge.Observers{cfg.Observer, g.feed}
		return
	}
	cfg.Observer = g.feed
}

// operatorPage builds the page's handler on the started core.
func (g *Gateway) operatorPage() *opsui.Handler {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return opsui.NewHandler(opsui.Config{
		Source:   g.core,
		Feed:     g.feed,
		Logins:   g.logins,
		Operator: g.operator,
		Cookie:   opsui.CookieName(g.addr),
		Secure:   g.tlsConf != nil,
		Peers:    g.pagePeers,
		Broker:   g.brokerLink,
		Host:     g.core.Host(),
		Boot:     hex.EncodeToString(b),
		Log:      g.log,
	})
}

// withOperatorPage serves /ui and everything under it with the page, the
// rest with next (MCP).
func (g *Gateway) withOperatorPage(next http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/ui", g.ui)
	mux.Handle("/ui/", g.ui)
	mux.Handle("/", next)
	return mux
}

// sockUILogin is the socket op "ui-login": a one-time link that logs a
// browser in to the operator page.
func (g *Gateway) sockUILogin() Reply {
	return Reply{OK: true, Login: g.loginURL(g.logins.NewCode())}
}

// loginURL is the page's login link for code, on a loopback address the
// page answers (an unspecified listen address becomes 127.0.0.1).
func (g *Gateway) loginURL(code string) string {
	host, port, err := net.SplitHostPort(g.addr)
	if err == nil {
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			host = "127.0.0.1"
		}
	}
	scheme := "http"
	if g.tlsConf != nil {
		scheme = "https"
	}
	u := url.URL{Scheme: scheme, Host: net.JoinHostPort(host, port), Path: "/ui/login", RawQuery: url.Values{"code": {code}}.Encode()}
	return u.String()
}

// UILogin is `herdbridge ui`: a one-time login link to the operator page
// of the gateway on stateDir, asked over its admin socket.
func UILogin(stateDir string) (string, error) {
	r, err := Ask(stateDir, Request{Op: "ui-login"})
	if err != nil {
		return "", err
	}
	return r.Login, nil
}

// pagePeers is each other host's trust both ways and clock skew, as the
// core measures them from the heartbeats (bridge/peers.go).
func (g *Gateway) pagePeers() map[string]opsui.Peer {
	m := map[string]opsui.Peer{}
	for _, p := range g.core.Peers() {
		we := p.WeTrust
		m[p.Host] = opsui.Peer{WeTrust: &we, TrustsUs: p.TrustsUs, Trust: p.Trust, Why: p.Why, SkewMs: p.SkewMs, LastHeartbeat: p.LastHeartbeat}
	}
	return m
}
