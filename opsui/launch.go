package opsui

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"html"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The one-time login link must not reach the browser on its command line:
// any local uid reads another's argv in /proc/PID/cmdline (or ps), and
// could redeem the code first. `herdbridge ui` writes instead a small page
// that holds the link — mode 0600 in a 0700 directory of the state dir,
// readable by this uid only — and hands the browser its file:// URL, which
// names no secret; the page sends the browser on to the link at once. A
// page is worthless once its code is used or expired (CodeTTL): each run
// removes the pages older than that.

// launchDir is where the login pages are written, inside the state dir.
const launchDir = "ui-login"

// WriteLoginPage writes a page that opens link, in stateDir, and returns
// its file:// URL.
func WriteLoginPage(stateDir, link string) (string, error) {
	dir := filepath.Join(stateDir, launchDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("operator page: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil { // MkdirAll keeps an existing dir's mode
		return "", fmt.Errorf("operator page: %w", err)
	}
	pruneLoginPages(dir, time.Now().Add(-CodeTTL))
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	path := filepath.Join(dir, "login-"+hex.EncodeToString(b)+".html")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("operator page: %w", err)
	}
	_, err = f.WriteString(loginPage(link))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return "", fmt.Errorf("operator page: %w", err)
	}
	return (&url.URL{Scheme: "file", Path: path}).String(), nil
}

// loginPage is the page: a refresh to link (no script needed, nothing
// loaded from anywhere), a link to follow if refreshes are off, and no
// Referer sent.
func loginPage(link string) string {
	a := html.EscapeString(link)
	return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="referrer" content="no-referrer">
<meta http-equiv="refresh" content="0;url=` + a + `">
<title>herdbridge — opening the operator page</title></head>
<body><p>Opening the operator page… <a href="` + a + `">continue</a> (the link works once, for ` + CodeTTL.String() + `)</p></body></html>
`
}

// pruneLoginPages removes the pages written before cutoff: their codes
// are dead.
func pruneLoginPages(dir string, cutoff time.Time) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "login-") || !strings.HasSuffix(e.Name(), ".html") {
			continue
		}
		if fi, err := e.Info(); err == nil && fi.ModTime().Before(cutoff) {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
