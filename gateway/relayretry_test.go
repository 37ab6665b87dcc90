package gateway

import (
	"encoding/json"
	"reflect"
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
// as the same call with a relay request_id added: every other member, at
// every level, keeps its value. It never panics.
func FuzzStampRequestID(f *testing.F) {
	f.Add(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"bridge_send","arguments":{"target":"w","message":"m"}}}`)
	f.Add(`{"id":1,"method":"tools/call","params":{"name":"bridge_ask","arguments":null}}`)
	f.Add(`{"id":1,"method":"tools/call","params":"x"}`)
	f.Add(`{"id":1,"method":"tools/call","params":{"name":"bridge_send","arguments":{"request\u005fid":"mine"}}}`)
	f.Add(`{"jsonrpc":"2.0","id":{"a":[1,2]},"method":"tools/call","_meta":{"progressToken":"p\u00e9"},` +
		`"params":{"name":"bridge_send","_meta":{"x":1},"arguments":{"target":"w","message":"l\u00e9 \"q\"\n\ud83d\ude00","wait_s":2.5e0,"k\"ey":null}}}`)
	f.Add(`{"id":"a<b","method":"tools/call","params":{"name":"bridge_send","arguments":{"m":"<&>\u2028","a":1,"a":2,"x": { "y" : [ 1e400 , 2 ] }}}}`)
	f.Fuzz(func(t *testing.T, line string) {
		out, retry := stampRequestID([]byte(line))
		if !retry || string(out) == line { // not retried, or the client's own request_id
			if string(out) != line {
				t.Fatalf("changed a line it does not retry: %q became %q", line, out)
			}
			return
		}
		want, werr := decodeNumbers(line)
		got, gerr := decodeNumbers(string(out))
		if werr != nil || gerr != nil {
			t.Fatalf("%q became %q: %v, %v", line, out, werr, gerr)
		}
		gotArgs := got["params"].(map[string]any)["arguments"].(map[string]any)
		if id, _ := gotArgs["request_id"].(string); !strings.HasPrefix(id, "relay-") {
			t.Fatalf("request_id %v in %q", gotArgs["request_id"], out)
		}
		delete(gotArgs, "request_id")
		params := want["params"].(map[string]any)
		wantArgs, _ := params["arguments"].(map[string]any) // nil: absent or null
		if wantArgs == nil {
			wantArgs = map[string]any{}
		}
		delete(wantArgs, "request_id") // it was "" or null
		params["arguments"] = wantArgs
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("members changed:\n%q\n%q", line, out)
		}
	})
}

// decodeNumbers decodes a JSON object keeping numbers as written (1e400
// has no float64).
func decodeNumbers(s string) (map[string]any, error) {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v map[string]any
	err := d.Decode(&v)
	return v, err
}
