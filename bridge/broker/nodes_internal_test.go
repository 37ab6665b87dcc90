package broker

import (
	"crypto/tls"
	"strings"
	"testing"
	"time"
)

// TestParseURLs: comma lists and repeated values make one list, blanks
// dropped, each URI once.
func TestParseURLs(t *testing.T) {
	got := ParseURLs("amqp://a, amqp://b", "", "amqp://c,amqp://a,")
	if strings.Join(got, " ") != "amqp://a amqp://b amqp://c" {
		t.Fatalf("got %q", got)
	}
}

// TestCheckURLsNamesTheBadOne: every URI is checked before any dial, and
// the error names the bad one without its password.
func TestCheckURLsNamesTheBadOne(t *testing.T) {
	for _, tc := range []struct {
		urls []string
		tls  *tls.Config
		want string
	}{
		{[]string{"amqp://u:pw@a:5672/", "http://u:secret@b/"}, nil, "http://…@b/"},
		{[]string{"amqp://u:pw@a:5672/", "amqp://u:secret@b:notaport/"}, nil, "amqp://…@b:notaport/"},
		{[]string{"amqps://a/", "amqp://u:secret@b/"}, &tls.Config{}, "amqp://…@b/ is not amqps://"},
		{nil, nil, "no broker URI"},
	} {
		err := CheckURLs(tc.urls, tc.tls)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "secret") {
			t.Errorf("%q: %v, want it to name %q, redacted", tc.urls, err, tc.want)
		}
	}
	if err := CheckURLs([]string{"amqp://a", "amqps://u:p@b:5671/vh"}, nil); err != nil {
		t.Fatal(err)
	}
}

// TestDialOrderPutsTheLostNodeLast: a round after a loss tries the other
// nodes first, and every node is in every round.
func TestDialOrderPutsTheLostNodeLast(t *testing.T) {
	urls := []string{"amqp://a", "amqp://b", "amqp://c"}
	firsts := map[string]int{}
	for range 300 {
		o := dialOrder(urls, "amqp://b", true)
		if len(o) != 3 || o[2] != "amqp://b" {
			t.Fatalf("order %q: the lost node is not last", o)
		}
		firsts[o[0]]++
	}
	if firsts["amqp://a"] == 0 || firsts["amqp://c"] == 0 {
		t.Fatalf("not shuffled: %v", firsts)
	}
	if o := dialOrder(urls[:1], "amqp://a", true); len(o) != 1 {
		t.Fatalf("one node: %q", o)
	}
	if strings.Join(urls, " ") != "amqp://a amqp://b amqp://c" {
		t.Fatalf("the configured list was reordered: %q", urls)
	}
}

// TestRoundBackoffIsJitteredAndCapped: full jitter within the cap.
func TestRoundBackoffIsJitteredAndCapped(t *testing.T) {
	seen := map[time.Duration]bool{}
	for round := range 40 {
		d := roundBackoff(round)
		if d <= 0 || d > maxRoundBackoff || round == 0 && d > 100*time.Millisecond {
			t.Fatalf("round %d: %v", round, d)
		}
		seen[d] = true
	}
	if len(seen) < 30 {
		t.Fatalf("not jittered: %d distinct waits of 40", len(seen))
	}
}

// TestNodeTLSServerName: each node is verified against its own host when
// there are several; a configured name holds only for one node; the
// configuration itself is never written to.
func TestNodeTLSServerName(t *testing.T) {
	conf := &tls.Config{ServerName: "mq.example"}
	if c := nodeTLS(conf, "amqps://n1.example:5671/", 2); c.ServerName != "n1.example" {
		t.Fatalf("several nodes: %q", c.ServerName)
	}
	if c := nodeTLS(conf, "amqps://n1.example:5671/", 1); c.ServerName != "mq.example" {
		t.Fatalf("one node: %q", c.ServerName)
	}
	if conf.ServerName != "mq.example" || nodeTLS(nil, "amqps://x/", 2) != nil {
		t.Fatal("the configuration was changed")
	}
	if nodeName("amqps://u:p@n1.example/vh") != "n1.example:5671" {
		t.Fatal(nodeName("amqps://u:p@n1.example/vh"))
	}
}
