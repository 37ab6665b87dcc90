package opsui_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/opsui"
)

// noRedirect is a client that shows redirects instead of following them.
func noRedirect() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// loginLink asks g for a one-time link, as `herdbridge ui --print` does.
func loginLink(t *testing.T, g *gateway.Gateway) string {
	t.Helper()
	link, err := gateway.UILogin(g.StateDir())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(link, g.URL()+"/ui/login?code=") {
		t.Fatalf("login link %q is not on %s", link, g.URL())
	}
	return link
}

// operatorClient is a browser-like client logged in to g's page.
func operatorClient(t *testing.T, g *gateway.Gateway) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	res, err := hc.Get(loginLink(t, g))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Request.URL.Path != "/ui" || res.Request.URL.RawQuery != "" {
		t.Fatalf("login: %d at %s", res.StatusCode, res.Request.URL)
	}
	return hc
}

func get(t *testing.T, hc *http.Client, url string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res, string(raw)
}

// TestPageLoginLinkWorksOnce: the link sets an HttpOnly, SameSite=Strict
// session cookie and redirects to /ui (no code left in the address bar);
// the same link again gets the login-needed page.
func TestPageLoginLinkWorksOnce(t *testing.T) {
	g := gatewaytest.StartLocal(t, "")
	link := loginLink(t, g)
	res, _ := get(t, noRedirect(), link)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/ui" {
		t.Fatalf("login: %d to %q, want 303 to /ui", res.StatusCode, res.Header.Get("Location"))
	}
	cookies := res.Cookies()
	if len(cookies) != 1 {
		t.Fatalf("cookies %v", cookies)
	}
	c := cookies[0]
	if c.Name != opsui.CookieName(g.Addr()) || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure || c.Value == "" {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/, not Secure on plain HTTP", c)
	}
	if strings.Contains(res.Header.Get("Referrer-Policy"), "origin") || res.Header.Get("Referrer-Policy") != "no-referrer" {
		t.Fatalf("Referrer-Policy %q", res.Header.Get("Referrer-Policy"))
	}
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	req, _ := http.NewRequest(http.MethodGet, g.URL()+"/ui", nil)
	req.AddCookie(c)
	res2, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res2.Body)
	res2.Body.Close()
	if res2.StatusCode != http.StatusOK || !strings.Contains(string(page), `id="feed"`) {
		t.Fatalf("/ui with the cookie: %d", res2.StatusCode)
	}
	again, body := get(t, noRedirect(), link)
	if again.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "herdbridge ui") || !strings.Contains(body, "used already") {
		t.Fatalf("second use: %d %q", again.StatusCode, body)
	}
	if len(again.Cookies()) != 0 {
		t.Fatal("a used link set a cookie")
	}
}

// TestPageWithoutSession: no cookie (or a made-up one) gets the page that
// says to run `herdbridge ui`, and every API a 401 with the same advice.
func TestPageWithoutSession(t *testing.T) {
	g := gatewaytest.StartLocal(t, "")
	hc := &http.Client{Timeout: 30 * time.Second}
	for _, cookie := range []string{"", opsui.CookieName(g.Addr()) + "=made-up"} {
		res, body := get(t, hc, g.URL()+"/ui", "Cookie", cookie)
		if res.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "herdbridge ui") || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("/ui with cookie %q: %d %s", cookie, res.StatusCode, res.Header.Get("Content-Type"))
		}
		for _, api := range []string{"/ui/api/snapshot", "/ui/api/events"} {
			res, body := get(t, hc, g.URL()+api, "Cookie", cookie)
			if res.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "operator_login_needed") || !strings.Contains(body, "herdbridge ui") {
				t.Fatalf("%s with cookie %q: %d %s", api, cookie, res.StatusCode, body)
			}
		}
	}
	// the page's assets hold no secret and load without a session
	if res, _ := get(t, hc, g.URL()+"/ui/style.css"); res.StatusCode != http.StatusOK {
		t.Fatalf("style.css: %d", res.StatusCode)
	}
	// MCP is still served beside the page
	if res, _ := get(t, hc, g.URL()+"/healthz"); res.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %d", res.StatusCode)
	}
}

// TestPageIsReadOnly: anything but GET or HEAD is refused, logged in or not.
func TestPageIsReadOnly(t *testing.T) {
	g := gatewaytest.StartLocal(t, "")
	hc := operatorClient(t, g)
	for _, path := range []string{"/ui", "/ui/login", "/ui/api/snapshot", "/ui/api/events"} {
		for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
			req, _ := http.NewRequest(m, g.URL()+path, strings.NewReader("{}"))
			res, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(res.Header.Get("Allow"), "GET") {
				t.Fatalf("%s %s: %d, Allow %q", m, path, res.StatusCode, res.Header.Get("Allow"))
			}
		}
	}
}

// sse reads a text/event-stream.
type sse struct {
	res     *http.Response
	br      *bufio.Reader
	raw     strings.Builder // everything read
	waiting string          // what until waits for
}

type sseEvent struct{ id, name, data string }

func openFeed(t *testing.T, hc *http.Client, url string, hdr ...string) *sse {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/ui/api/events", nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	c := *hc
	c.Timeout = 0 // a stream lives until the test ends
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("feed: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	return &sse{res: res, br: bufio.NewReader(res.Body)}
}

// next reads the next event (comments skipped).
func (s *sse) next(t *testing.T) sseEvent {
	t.Helper()
	var ev sseEvent
	for {
		line, err := s.br.ReadString('\n')
		s.raw.WriteString(line)
		if err != nil {
			t.Fatalf("feed ended (waiting for: %s): %v (read so far: %q)", s.waiting, err, s.raw.String())
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "" && ev.name != "":
			return ev
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev.name = line[7:]
		case strings.HasPrefix(line, "data: "):
			ev.data = line[6:]
		}
	}
}

// until reads events until ok says so, within the deadline the caller's
// stream has (a body read blocks: the test's own timeout bounds it).
func (s *sse) until(t *testing.T, what string, ok func(sseEvent, opsui.Item) bool) opsui.Item {
	t.Helper()
	s.waiting = what + " (30 s)"
	timer := time.AfterFunc(30*time.Second, func() { s.res.Body.Close() })
	defer timer.Stop()
	for {
		ev := s.next(t)
		var it opsui.Item
		if ev.name == "hop" {
			if err := json.Unmarshal([]byte(ev.data), &it); err != nil {
				t.Fatalf("hop %q: %v", ev.data, err)
			}
		}
		if ok(ev, it) {
			return it
		}
	}
}

// TestFeedShowsTrafficWithoutBodies: a send from alice to bob shows in the
// live feed by name with its hops, and neither the feed nor the snapshot
// ever holds the message's body.
func TestFeedShowsTrafficWithoutBodies(t *testing.T) {
	g := gatewaytest.StartLocal(t, "")
	hc := operatorClient(t, g)
	feed := openFeed(t, hc, g.URL())
	hello := feed.next(t)
	if hello.name != "hello" || !strings.Contains(hello.data, `"host":"testhost"`) {
		t.Fatalf("first event %+v", hello)
	}
	alice := gatewaytest.HTTPConn(t, g, "alice", "primary")
	gatewaytest.Register(t, g, "bob", "worker")
	const body = "BODY-MARKER-do-not-leak-7f3a"
	if r := alice.Call("bridge_send", map[string]any{"target": "bob", "message": body}); r.IsError {
		t.Fatalf("send: %s", r.Text)
	}
	held := feed.until(t, "bob's message held", func(ev sseEvent, it opsui.Item) bool {
		return it.Hop == "hold" && it.FromName == "alice" && it.ToName == "bob"
	})
	if held.Kind != "SEND" || held.MsgID == "" {
		t.Fatalf("held hop %+v", held)
	}
	if strings.Contains(feed.raw.String(), body) {
		t.Fatal("the feed carried a message body")
	}
	res, snap := get(t, hc, g.URL()+"/ui/api/snapshot")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("snapshot: %d", res.StatusCode)
	}
	if strings.Contains(snap, body) {
		t.Fatal("the snapshot carried a message body")
	}
	var s opsui.Snapshot
	if err := json.Unmarshal([]byte(snap), &s); err != nil {
		t.Fatal(err)
	}
	var bob *opsui.EntityRow
	for i := range s.Entities {
		if s.Entities[i].Name == "bob" {
			bob = &s.Entities[i]
		}
	}
	if bob == nil || bob.Held != 1 || bob.Role != "worker" || s.Host != "testhost" || len(s.Hosts) != 1 || !strings.HasPrefix(hello.data, `{"host":"testhost","boot":"`+s.Boot) {
		t.Fatalf("snapshot %s", snap)
	}
}

// TestFeedChecksOrigin: the event stream answers its own page only: a
// foreign Origin, or a cross-site fetch, is refused.
func TestFeedChecksOrigin(t *testing.T) {
	g := gatewaytest.StartLocal(t, "")
	hc := operatorClient(t, g)
	for _, hdr := range [][]string{
		{"Origin", "http://evil.example"},
		{"Origin", "http://localhost:1"},
		{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "cors"},
	} {
		res, body := get(t, hc, g.URL()+"/ui/api/events", hdr...)
		if res.StatusCode != http.StatusForbidden {
			t.Fatalf("events with %v: %d %s", hdr, res.StatusCode, body)
		}
	}
	if res, _ := get(t, hc, g.URL()+"/ui/api/snapshot", "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "cors"); res.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site snapshot: %d", res.StatusCode)
	}
	feed := openFeed(t, hc, g.URL(), "Origin", g.URL(), "Sec-Fetch-Site", "same-origin")
	if ev := feed.next(t); ev.name != "hello" {
		t.Fatalf("same-origin feed: %+v", ev)
	}
}

// TestPageAfterRestart: a restarted gateway forgets the sessions, so the
// page's requests get 401 (and it asks for `herdbridge ui`); a new link
// works.
func TestPageAfterRestart(t *testing.T) {
	dir := gatewaytest.TempDir(t)
	cfg := gatewaytest.LocalConfig(t, dir)
	g1, err := gateway.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- g1.Run(context.Background()) }()
	hc := operatorClient(t, g1)
	feed := openFeed(t, hc, g1.URL())
	feed.next(t)
	g1.Close()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if _, err := feed.br.ReadString(0); err == nil {
		t.Fatal("the stream outlived its gateway")
	}
	cfg.Listen = g1.Addr() // the same address: the browser's cookie goes to it
	g2 := gatewaytest.Start(t, cfg)
	if res, _ := get(t, hc, g2.URL()+"/ui/api/snapshot"); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("old session after a restart: %d", res.StatusCode)
	}
	hc2 := operatorClient(t, g2)
	if res, _ := get(t, hc2, g2.URL()+"/ui/api/snapshot"); res.StatusCode != http.StatusOK {
		t.Fatalf("new session: %d", res.StatusCode)
	}
}
