package mcp

import "testing"

func TestBearerToken(t *testing.T) {
	for h, want := range map[string]string{
		"Bearer abc": "abc", "bearer abc": "abc", "BEARER abc": "abc", "Bearer   abc  ": "abc", "  Bearer abc": "abc",
		"": "", "Bearer": "", "Bearer ": "", "Basic abc": "", "Bearerabc": "", "Token abc": "",
	} {
		if got := bearerToken(h); got != want {
			t.Errorf("bearerToken(%q) = %q, want %q", h, got, want)
		}
	}
}

func TestLoopbackOrigin(t *testing.T) {
	for o, want := range map[string]bool{
		"http://localhost": true, "http://localhost:6274": true, "https://LocalHost:1": true,
		"http://127.0.0.1": true, "http://127.0.0.1:7077": true, "https://127.0.0.1:443/": true,
		"http://[::1]": true, "http://[::1]:3000": true, "http://127.1.2.3:80": true,
		"null": false, "": false, "http://localhost.evil.example": false, "http://evil.example": false,
		"http://127.0.0.1.nip.io": false, "http://192.168.0.1": false, "http://[::ffff:192.168.0.1]": false,
		"ftp://localhost": false, "file://": false, "http://user@localhost": false, "http://localhost/x": false,
		"http://localhost?x": false, "http://[fe80::1%25lo]": false, "http://0.0.0.0": false, "localhost:3000": false,
	} {
		if got := loopbackOrigin(o); got != want {
			t.Errorf("loopbackOrigin(%q) = %v, want %v", o, got, want)
		}
	}
}
