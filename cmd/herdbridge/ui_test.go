package main

import (
	"bytes"
	"context"
	"html"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

func runUI(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := run(context.Background(), append([]string{"ui"}, args...), strings.NewReader(""), &out, &errOut); err != nil {
		t.Fatalf("ui %v: %v (stderr %s)", args, err, errOut.String())
	}
	return out.String(), errOut.String()
}

// loginWorks follows link once without redirects: a 303 to /ui with a
// session cookie.
func loginWorks(t *testing.T, link string) {
	t.Helper()
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := hc.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || len(res.Cookies()) != 1 {
		t.Fatalf("login link %s: %d, cookies %v", link, res.StatusCode, res.Cookies())
	}
}

// TestUIPrint: `herdbridge ui --print` prints only a one-time login link,
// which logs a browser in.
func TestUIPrint(t *testing.T) {
	dir := gatewaytest.TempDir(t)
	g := gatewaytest.StartLocal(t, dir)
	out, _ := runUI(t, "--print", "--state-dir", dir)
	link := strings.TrimSpace(out)
	if strings.Count(out, "\n") != 1 || !strings.HasPrefix(link, g.URL()+"/ui/login?code=") {
		t.Fatalf("ui --print printed %q", out)
	}
	loginWorks(t, link)
}

// TestUIOpensBrowser: `herdbridge ui` hands $BROWSER a file:// URL and
// prints no secret: the browser's command line, which every local uid can
// read in /proc, names no code; the page it opens is this user's only
// (0600 in a 0700 dir) and leads to a working one-time link. Where the
// browser cannot start, it prints the link.
func TestUIOpensBrowser(t *testing.T) {
	dir := gatewaytest.TempDir(t)
	gatewaytest.StartLocal(t, dir)
	got := filepath.Join(gatewaytest.TempDir(t), "opened")
	script := filepath.Join(gatewaytest.TempDir(t), "browser.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nprintf %s \"$*\" > "+got+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BROWSER", script)
	out, errOut := runUI(t, "--state-dir", dir)
	opened, err := os.ReadFile(got)
	if err != nil {
		t.Fatalf("the browser was not started: %v (stderr %s)", err, errOut)
	}
	if strings.Contains(out+errOut, "code=") || !strings.Contains(errOut, "opened") {
		t.Fatalf("ui printed stdout %q stderr %q", out, errOut)
	}
	argv := string(opened)
	if strings.Contains(argv, "code") || !strings.HasPrefix(argv, "file://") {
		t.Fatalf("the browser's command line is %q: it must name no secret (a file:// page)", argv)
	}
	loginWorks(t, pageLink(t, argv))

	t.Setenv("BROWSER", filepath.Join(dir, "no-such-browser"))
	out, errOut = runUI(t, "--state-dir", dir)
	if !strings.Contains(errOut, "could not open a browser") {
		t.Fatalf("fallback stderr %q", errOut)
	}
	loginWorks(t, strings.TrimSpace(out))
}

// pageLink checks the login page at a file:// URL is readable by this
// user only and returns the link it opens.
func pageLink(t *testing.T, fileURL string) string {
	t.Helper()
	u, err := url.Parse(fileURL)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{u.Path: 0o600, filepath.Dir(u.Path): 0o700} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %o, want %o", path, fi.Mode().Perm(), want)
		}
	}
	raw, err := os.ReadFile(u.Path)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`content="0;url=([^"]+)"`).FindStringSubmatch(string(raw))
	if m == nil {
		t.Fatalf("the login page holds no refresh to the link: %s", raw)
	}
	return html.UnescapeString(m[1])
}

// TestUIWithoutGateway: with no gateway the command says how to start one.
func TestUIWithoutGateway(t *testing.T) {
	dir := gatewaytest.TempDir(t)
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"ui", "--print", "--state-dir", dir}, strings.NewReader(""), &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "herdbridge gateway") {
		t.Fatalf("ui without a gateway: %v", err)
	}
}
