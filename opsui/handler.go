package opsui

import (
	"embed"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/herdbridge/herdbridge/bridge/broker"
)

//go:embed assets
var assets embed.FS

// Config wires the page to its gateway.
type Config struct {
	Source Source
	Feed   *Feed
	Logins *Logins
	// Operator is the gateway's operator check: does r carry a live
	// operator session? The page asks nothing else.
	Operator func(r *http.Request) bool
	// Cookie is the session cookie's name (CookieName of the listener).
	Cookie string
	// Secure marks the session cookie Secure (the listener serves TLS).
	Secure bool
	// Peers adds each other host's trust and clock skew to the hosts
	// table, by host; nil: those columns read "—".
	Peers func() map[string]Peer
	// Broker is the broker node the gateway is connected to; nil (or
	// returning nil): the embedded transport, no broker shown.
	Broker func() *broker.Link
	Host   string // this gateway's host id
	Boot   string // an id of this gateway run: a page sees a restart by it
	Log    *slog.Logger
	Now    func() time.Time // nil: time.Now
}

// Handler serves the operator page under /ui. Stop ends its open event
// streams (an http.Server's Shutdown waits for idle connections, and a
// stream is never idle).
type Handler struct {
	h    *handler
	mux  *http.ServeMux
	once sync.Once
}

type handler struct {
	cfg   Config
	names *Names
	stop  chan struct{}
	now   func() time.Time
}

// NewHandler builds the page's handler.
func NewHandler(cfg Config) *Handler {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Cookie == "" {
		cfg.Cookie = CookieName("")
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	h := &handler{cfg: cfg, names: NewNames(cfg.Source.Roster, now), stop: make(chan struct{}), now: now}
	mux := http.NewServeMux()
	mux.HandleFunc("/ui", h.page)
	mux.HandleFunc("/ui/login", h.login)
	mux.HandleFunc("/ui/api/snapshot", h.snapshotJSON)
	mux.HandleFunc("/ui/api/events", h.events)
	mux.HandleFunc("/ui/app.js", h.asset("app.js", "text/javascript; charset=utf-8"))
	mux.HandleFunc("/ui/style.css", h.asset("style.css", "text/css; charset=utf-8"))
	mux.HandleFunc("/ui/", http.NotFound)
	return &Handler{h: h, mux: mux}
}

// ServeHTTP applies the page's rules to every request, then routes it:
// GET or HEAD only (the page changes nothing), from a loopback peer only.
func (p *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w)
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeJSON(w, http.StatusMethodNotAllowed, apiError{Error: "method_not_allowed", Message: "the operator page is read-only: GET only"})
		return
	}
	if !loopbackPeer(r.RemoteAddr) {
		writeJSON(w, http.StatusForbidden, apiError{Error: "loopback_only", Message: "the operator page is served to this host only: " +
			"open it on the gateway's host, or tunnel to it (ssh -L 7077:127.0.0.1:7077 HOST)"})
		return
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" || site == "same-site" {
		// another site may link to the page or a login link, nothing else
		if (r.URL.Path != "/ui" && r.URL.Path != "/ui/login") || r.Header.Get("Sec-Fetch-Mode") != "navigate" {
			writeJSON(w, http.StatusForbidden, apiError{Error: "cross_site", Message: "the operator page answers its own page only"})
			return
		}
	}
	p.mux.ServeHTTP(w, r)
}

// Stop ends every open event stream now; idempotent.
func (p *Handler) Stop() { p.once.Do(func() { close(p.h.stop) }) }

// securityHeaders: nothing of the page loads from elsewhere, it is framed
// nowhere, and it sends no Referer (the login link carried a code).
func securityHeaders(w http.ResponseWriter) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "+
		"base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cache-Control", "no-store")
}

// loopbackPeer: the connection comes from this host (directly or through
// a tunnel that ends here).
func loopbackPeer(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return false
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// page is /ui: the page for an operator, else the login-needed page.
func (h *handler) page(w http.ResponseWriter, r *http.Request) {
	if !h.cfg.Operator(r) {
		h.loginNeeded(w, "")
		return
	}
	h.serveAsset(w, "index.html", "text/html; charset=utf-8")
}

// login is /ui/login?code=…: the one-time code becomes a session cookie,
// and the browser goes on to /ui, so no secret stays in its address bar.
func (h *handler) login(w http.ResponseWriter, r *http.Request) {
	session, ok := h.cfg.Logins.Redeem(r.URL.Query().Get("code"))
	if !ok {
		h.cfg.Log.Info("operator login refused: the code is unknown, used or expired")
		h.loginNeeded(w, "This login link was used already or has expired: each link works once, for "+CodeTTL.String()+".")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: h.cfg.Cookie, Value: session, Path: "/", MaxAge: int(SessionTTL / time.Second),
		HttpOnly: true, Secure: h.cfg.Secure, SameSite: http.SameSiteStrictMode})
	h.cfg.Log.Info("operator logged in to the page")
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		// the link came from another site — the file:// page `herdbridge
		// ui` opens (launch.go) is one — and a browser does not send a
		// SameSite=Strict cookie on the redirect of a cross-site
		// navigation: the page moves on to /ui itself, a same-site
		// navigation that carries the cookie
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, onwardPage)
		return
	}
	http.Redirect(w, r, "/ui", http.StatusSeeOther)
}

// onwardPage sends the browser on to /ui (a refresh: the page's CSP allows
// no inline script, and none is needed).
const onwardPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=/ui">
<title>herdbridge — logged in</title></head>
<body><p>Logged in. <a href="/ui">Open the operator page</a>.</p></body></html>
`

// loginNeeded is the 401 page that says how to get in.
func (h *handler) loginNeeded(w http.ResponseWriter, why string) {
	raw, err := assets.ReadFile("assets/login.html")
	if err != nil {
		http.Error(w, "operator page assets missing", http.StatusInternalServerError)
		return
	}
	page := strings.Replace(string(raw), "{{why}}", htmlEscape(why), 1)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write([]byte(page))
}

func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#39;").Replace(s)
}

func (h *handler) asset(name, ctype string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) { h.serveAsset(w, name, ctype) }
}

func (h *handler) serveAsset(w http.ResponseWriter, name, ctype string) {
	raw, err := assets.ReadFile("assets/" + name)
	if err != nil {
		http.Error(w, "operator page asset missing: "+name, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", ctype)
	_, _ = w.Write(raw)
}

// apiError is the JSON of a refused API request.
type apiError struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// needOperator answers 401 to a request without a live operator session.
func (h *handler) needOperator(w http.ResponseWriter, r *http.Request) bool {
	if h.cfg.Operator(r) {
		return true
	}
	writeJSON(w, http.StatusUnauthorized, apiError{Error: "operator_login_needed",
		Message: "no operator session (or the gateway restarted): run `herdbridge ui` on this host for a new login link"})
	return false
}

func (h *handler) snapshotJSON(w http.ResponseWriter, r *http.Request) {
	if !h.needOperator(w, r) {
		return
	}
	writeJSON(w, http.StatusOK, h.snapshot())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
