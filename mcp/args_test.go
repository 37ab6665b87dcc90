package mcp

import (
	"encoding/json"
	"testing"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

func reqWith(raw []byte) (mcpgo.CallToolRequest, bool) {
	var args any
	if json.Unmarshal(raw, &args) != nil {
		return mcpgo.CallToolRequest{}, false
	}
	r := mcpgo.CallToolRequest{}
	r.Params.Arguments = args
	return r, true
}

func TestDecodeArgsStrict(t *testing.T) {
	cases := []struct {
		raw string
		ok  bool
	}{
		{`{"target":"w","message":"m"}`, true},
		{`{"target":"w","message":"m","wait_s":1.5,"turn_id":"x"}`, true},
		{`{"target":"w","message":"m","from":"w"}`, false},
		{`{"target":1,"message":"m"}`, false},
		{`{"target":"w","message":"m","wait_s":"1"}`, false},
		{`[1,2]`, false},
		{`null`, true},
	}
	for _, c := range cases {
		r, _ := reqWith([]byte(c.raw))
		var a sendArgs
		err := decodeArgs(r, &a)
		if (err == nil) != c.ok {
			t.Errorf("%s: err=%v, want ok=%v", c.raw, err, c.ok)
		}
	}
}

// FuzzToolArgs: no argument bytes crash a decoder; whatever decodes is
// within the documented bounds once checked.
func FuzzToolArgs(f *testing.F) {
	for _, s := range []string{
		`{"target":"w","message":"m","wait_s":3}`, `{"question":"q","timeout_s":10}`,
		`{"target":"w","wait_s":1e308,"max":-1,"peek":true}`, `{"message":"m","group":"g"}`, `{}`, `{"max":99999999999}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, ok := reqWith(raw)
		if !ok {
			return
		}
		var s sendArgs
		if decodeArgs(r, &s) == nil {
			if d, err := seconds(s.WaitS, "wait_s", 3600); err == nil && (d < 0 || d.Seconds() > 3600) {
				t.Fatalf("wait_s out of bounds accepted: %v", d)
			}
		}
		var a askArgs
		_ = decodeArgs(r, &a)
		var p pollArgs
		_ = decodeArgs(r, &p)
		var b broadcastArgs
		_ = decodeArgs(r, &b)
	})
}
