package gateway

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestStampRequestID: the relay stamps a request_id on calls of the
// idempotent tools that have none, keeps the client's own, and leaves
// every other line alone.
func TestStampRequestID(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		retry      bool
		keep       string // the request_id the line must carry after ("" : a new one, "-": none)
	}{
		{"send without id", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"bridge_send","arguments":{"target":"w","message":"m"}}}`, true, ""},
		{"ask with id", `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"bridge_ask","arguments":{"question":"q","request_id":"mine"}}}`, true, "mine"},
		{"empty id stamped", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"bridge_send","arguments":{"target":"w","message":"m","request_id":""}}}`, true, ""},
		{"null id stamped", `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"bridge_ask","arguments":{"question":"q","request_id":null}}}`, true, ""},
		{"broadcast without arguments", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"bridge_broadcast"}}`, true, ""},
		{"poll", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"bridge_poll","arguments":{}}}`, false, "-"},
		{"notification", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"bridge_send","arguments":{}}}`, false, "-"},
		{"arguments not an object", `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"bridge_send","arguments":[1]}}`, false, "-"},
		{"not json", `{"jsonrpc":`, false, "-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, retry := stampRequestID([]byte(tc.line))
			if retry != tc.retry {
				t.Fatalf("retry %v, want %v", retry, tc.retry)
			}
			if tc.keep == "-" {
				if string(out) != tc.line {
					t.Fatalf("changed a line it must leave alone: %s", out)
				}
				return
			}
			var m struct {
				ID     json.RawMessage `json:"id"`
				Params struct {
					Arguments map[string]any `json:"arguments"`
				} `json:"params"`
			}
			if err := json.Unmarshal(out, &m); err != nil {
				t.Fatal(err)
			}
			id, _ := m.Params.Arguments["request_id"].(string)
			if tc.keep != "" && id != tc.keep || tc.keep == "" && !strings.HasPrefix(id, "relay-") {
				t.Fatalf("request_id %q in %s", id, out)
			}
		})
	}
}

// TestStampRequestIDKeepsMembers: the stamped call carries every other
// member of the client's line with the same value, escapes and all.
func TestStampRequestIDKeepsMembers(t *testing.T) {
	line := `{"jsonrpc":"2.0","id":{"a":[1,2]},"method":"tools/call","_meta":{"progressToken":"p\u00e9"},` +
		`"params":{"name":"bridge_send","_meta":{"x":1},"arguments":{"target":"w","message":"l\u00e9 \"q\"\n\ud83d\ude00","wait_s":2.5e0,"k\"ey":null}}}`
	out, retry := stampRequestID([]byte(line))
	if !retry || !json.Valid(out) {
		t.Fatalf("retry %v, line %s", retry, out)
	}
	var want, got map[string]any
	if err := json.Unmarshal([]byte(line), &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	args := got["params"].(map[string]any)["arguments"].(map[string]any)
	if id, _ := args["request_id"].(string); !strings.HasPrefix(id, "relay-") {
		t.Fatalf("request_id %q", id)
	}
	delete(args, "request_id")
	if w, g := fmt.Sprint(want), fmt.Sprint(got); w != g {
		t.Fatalf("members changed:\n want %s\n got  %s", w, g)
	}
}

// BenchmarkStampRequestID is the relay's work on each send it may re-issue.
func BenchmarkStampRequestID(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"bridge_send","arguments":{"target":"lead","message":"` + strings.Repeat("done: built the thing. ", 40) + `"}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := stampRequestID(line); !ok {
			b.Fatal("not stamped")
		}
	}
}

// FuzzStampRequestID: any client line is either left alone or comes back
// as JSON with a request_id; it never panics.
func FuzzStampRequestID(f *testing.F) {
	f.Add(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"bridge_send","arguments":{"target":"w","message":"m"}}}`)
	f.Add(`{"id":1,"method":"tools/call","params":{"name":"bridge_ask","arguments":null}}`)
	f.Add(`{"id":1,"method":"tools/call","params":"x"}`)
	f.Fuzz(func(t *testing.T, line string) {
		out, retry := stampRequestID([]byte(line))
		if !retry {
			return
		}
		if !json.Valid(out) || !strings.Contains(string(out), "request_id") {
			t.Fatalf("retried line %q became %q", line, out)
		}
	})
}
