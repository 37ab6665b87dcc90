package opsui

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzParseEventID: a Last-Event-ID is whatever a browser or a script
// sends. Only "<boot>-<seq>" of this run, spelled canonically, is taken,
// and what is taken reads back as the same id.
func FuzzParseEventID(f *testing.F) {
	for _, s := range []string{"b00t-1", "b00t-18446744073709551615", "b00t-", "-1", "b00t-01", "other-5", "b00t--1", "b00t-1-2", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		n, ok := parseEventID(id, "b00t")
		if ok && fmt.Sprintf("b00t-%d", n) != id {
			t.Fatalf("%q taken as seq %d", id, n)
		}
	})
}

// FuzzSameOrigin: an Origin header counts as the page's own only when it
// is exactly the scheme and host the request was made to.
func FuzzSameOrigin(f *testing.F) {
	for _, s := range []string{"http://127.0.0.1:7077", "http://127.0.0.1:7077/", "https://127.0.0.1:7077", "http://evil.example", "null", "http://127.0.0.1:7077@evil", "http://127.0.0.1:7077/x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, origin string) {
		r := httptest.NewRequest("GET", "http://127.0.0.1:7077/ui/api/events", nil)
		if sameOrigin(origin, r) && !strings.EqualFold(origin, "http://127.0.0.1:7077") {
			t.Fatalf("origin %q taken as the page's own", origin)
		}
	})
}
