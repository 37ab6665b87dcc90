package opsui_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/opsui"
)

// chromium finds Debian's Chromium. Under CI its absence fails the test
// (.ci/run installs it); elsewhere the test skips and says why.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no Chromium on PATH, and CI is set: install Debian's chromium (apt-get install chromium; .ci/run does)")
	}
	t.Skip("no Chromium on PATH (apt-get install chromium): the operator page's browser test needs one")
	return ""
}

// artifact is where a test writes a file for people to look at:
// $HERDBRIDGE_ARTIFACTS if set, else the temp dir.
func artifact(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("HERDBRIDGE_ARTIFACTS")
	if dir == "" {
		dir = os.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, name)
}

// TestPageInBrowser drives the page in a real headless Chromium: the
// one-time link logs in and leaves /ui in the address bar, the roster
// shows, a send appears live in the feed by name (in a second tab too,
// which shares the first tab's stream), no body reaches the page, the page fits a phone's width and has a dark mode. Screenshots
// are written as artifacts (their paths are logged).
func TestPageInBrowser(t *testing.T) {
	exe := chromium(t)
	g := gatewaytest.StartLocal(t, "")
	gatewaytest.Register(t, g, "bob", "worker")
	alice := gatewaytest.HTTPConn(t, g, "alice", "primary")

	browser := startBrowser(t, exe)
	ctx := tab(t, browser)

	do(t, ctx, "log in and see the roster",
		chromedp.Navigate(loginLink(t, g)),
		chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`)),
		waitJS(`[...document.querySelectorAll("#entities tbody td")].some(td => td.textContent === "bob")`),
	)
	path := value(t, ctx, "the address", chromedp.Location())
	if !strings.HasSuffix(path, "/ui") || strings.Contains(path, "code") {
		t.Fatalf("after login the address bar shows %s, want …/ui with no code", path)
	}
	do(t, ctx, "the feed goes live", waitJS(`document.getElementById("conn").dataset.state === "live"`))
	do(t, ctx, "no broker named on the embedded transport", waitJS(`document.getElementById("broker").hidden`))
	// a second tab shares the first one's stream instead of opening its own
	tab2 := tab(t, browser)
	do(t, tab2, "a second tab", chromedp.Navigate(g.URL()+"/ui"), chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`)))

	const body = "BROWSER-BODY-MARKER-91c2"
	if r := alice.Call("bridge_send", map[string]any{"target": "bob", "message": body}); r.IsError {
		t.Fatalf("send: %s", r.Text)
	}
	do(t, ctx, "the send appears live in the feed",
		waitJS(`[...document.querySelectorAll("#feed tbody tr.hop")].some(tr => tr.textContent.includes("alice → bob") && tr.textContent.includes("hold"))`),
		waitJS(`[...document.querySelectorAll("#entities tbody tr")].some(tr => tr.cells[0].textContent === "bob" && tr.cells[4].textContent === "1")`),
	)
	do(t, tab2, "the send appears in the second tab too",
		waitJS(`[...document.querySelectorAll("#feed tbody tr.hop")].some(tr => tr.textContent.includes("alice → bob") && tr.textContent.includes("hold"))`))
	streams := value(t, tab2, "open streams", chromedp.Evaluate[int](`fetch("/ui/api/snapshot").then(r => r.json()).then(s => s.streams)`, chromedp.EvalAwaitPromise))
	if streams != 1 {
		t.Fatalf("two tabs hold %d event streams, want 1 shared", streams)
	}
	if html := value(t, ctx, "the page", chromedp.OuterHTML(chromedp.CSS("html"))); strings.Contains(html, body) {
		t.Fatal("a message body reached the page")
	}
	shot(t, ctx, "herdbridge-ui.png")

	do(t, ctx, "phone width",
		chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
		waitJS(`window.innerWidth === 390`),
	)
	if !value(t, ctx, "fits", chromedp.Evaluate[bool](`document.documentElement.scrollWidth <= window.innerWidth + 1`)) {
		t.Fatal("at phone width the page scrolls sideways: its tables must scroll inside their boxes")
	}
	light := value(t, ctx, "light background", chromedp.Evaluate[string](`getComputedStyle(document.body).backgroundColor`))
	do(t, ctx, "dark mode", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
		return err
	}))
	if dark := value(t, ctx, "dark background", chromedp.Evaluate[string](`getComputedStyle(document.body).backgroundColor`)); dark == light {
		t.Fatalf("prefers-color-scheme: dark leaves the background %s", light)
	}
	shot(t, ctx, "herdbridge-ui-phone-dark.png")
}

// startBrowser starts a headless Chromium for the test (its first tab
// stays blank: tab opens the ones the test uses).
func startBrowser(t *testing.T, exe string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.WindowSize(1280, 1000))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	browser, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancel)
	if err := chromedp.Do(browser); err != nil { // starts the browser, with no timeout (one would stop it)
		t.Fatalf("start Chromium %s: %v", exe, err)
	}
	return browser
}

// tab opens a new tab of browser, bounded to 3 minutes (a loaded machine
// is slow; the bound only stops a hung test).
func tab(t *testing.T, browser context.Context) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	ctx, cancelT := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(cancelT)
	return ctx
}

// do runs steps, failing the test with what the page shows.
func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		shown, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
		t.Fatalf("%s: %v\npage text: %s", what, err, shown)
	}
}

// value runs one action for its value.
func value[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// waitJS polls expr until it is true (the tab's context bounds it, not
// chromedp's default 30 s).
func waitJS(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0))
}

func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png := value(t, ctx, "screenshot", chromedp.FullScreenshot(100))
	p := artifact(t, name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", p, len(png))
}

// TestPageAfterGatewayRestart: a restarted gateway forgets the session;
// the open page says it is logged out and how to log in, and once
// `herdbridge ui` logs in again (in a new tab, as it does) the old tab
// carries on by itself and both tabs see new traffic live.
func TestPageAfterGatewayRestart(t *testing.T) {
	exe := chromium(t)
	cfg := gatewaytest.LocalConfig(t, "")
	g1, err := gateway.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- g1.Run(context.Background()) }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			g1.Close()
			<-ran
		}
	})
	browser := startBrowser(t, exe)
	old := tab(t, browser)
	do(t, old, "log in", chromedp.Navigate(loginLink(t, g1)), waitJS(`document.getElementById("conn").dataset.state === "live"`))

	g1.Close()
	stopped = true
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	cfg.Listen = g1.Addr() // the same address, so the browser comes back to it
	g2 := gatewaytest.Start(t, cfg)
	do(t, old, "the old tab says it is logged out",
		waitJS(`document.getElementById("conn").dataset.state === "gone" && !document.getElementById("gone").hidden`))
	if text := value(t, old, "banner", chromedp.Text(chromedp.CSS("#gone"))); !strings.Contains(text, "herdbridge ui") {
		t.Fatalf("the logged-out banner says %q", text)
	}

	fresh := tab(t, browser)
	do(t, fresh, "log in again", chromedp.Navigate(loginLink(t, g2)), chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`)))
	do(t, old, "the old tab carries on", waitJS(`document.getElementById("conn").dataset.state === "live" && document.getElementById("gone").hidden`))
	gatewaytest.Register(t, g2, "bob", "worker")
	alice := gatewaytest.HTTPConn(t, g2, "alice", "primary")
	if r := alice.Call("bridge_send", map[string]any{"target": "bob", "message": "after the restart"}); r.IsError {
		t.Fatalf("send: %s", r.Text)
	}
	for _, ctx := range []context.Context{old, fresh} {
		do(t, ctx, "the send shows live after the restart",
			waitJS(`[...document.querySelectorAll("#feed tbody tr.hop")].some(tr => tr.textContent.includes("alice → bob"))`))
	}
	if !value(t, old, "restart note", chromedp.Evaluate[bool](`[...document.querySelectorAll("#feed tbody tr.note")].some(tr => tr.textContent.includes("the gateway restarted"))`)) {
		t.Fatal("the old tab's feed does not say the gateway restarted")
	}
}

// TestLoginPageInBrowser: what `herdbridge ui` hands the browser — the
// file:// URL of a page holding the one-time link, so no secret is on the
// browser's command line — logs a real Chromium in: it lands on /ui with
// the page live and no code in the address bar, and the link is used up.
func TestLoginPageInBrowser(t *testing.T) {
	exe := chromium(t)
	g := gatewaytest.StartLocal(t, "")
	gatewaytest.Register(t, g, "bob", "worker")
	link := loginLink(t, g)
	page, err := opsui.WriteLoginPage(g.StateDir(), link)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(page, "code") || !strings.HasPrefix(page, "file://") {
		t.Fatalf("the browser would be started with %q", page)
	}
	ctx := tab(t, startBrowser(t, exe))
	do(t, ctx, "open the login page and see the roster",
		chromedp.Navigate(page),
		chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`)),
		waitJS(`[...document.querySelectorAll("#entities tbody td")].some(td => td.textContent === "bob")`),
		waitJS(`document.getElementById("conn").dataset.state === "live"`),
	)
	if at := value(t, ctx, "the address", chromedp.Location()); !strings.HasSuffix(at, "/ui") || strings.Contains(at, "code") {
		t.Fatalf("after login the address bar shows %s, want …/ui with no code", at)
	}
	res, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the link after the browser used it: %d, want 401 (it works once)", res.StatusCode)
	}
}
