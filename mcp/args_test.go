package mcp

import (
	"encoding/json"
	"strings"
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
		{`{"target":"w","message":"m","wait_s":"1"}`, true}, // a numeric string is taken as the number
		{`{"target":"w","message":"m","wait_s":" 2.5 "}`, true},
		{`{"target":"w","message":"m","wait_s":"soon"}`, false},
		{`{"target":"w","message":"m","wait_s":"0x10"}`, false},
		{`{"target":"w","message":"m","wait_s":"NaN"}`, false},
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

// TestArgErrorsArePlain: a mistake in the arguments is told as a sentence
// naming the argument and what it takes, never with Go or JSON internals.
func TestArgErrorsArePlain(t *testing.T) {
	cases := []struct {
		raw  string
		into any
		want string
	}{
		{`{"target":"w","message":"m","wait_s":"soon"}`, &sendArgs{}, "wait_s must be a number"},
		{`{"target":1,"message":"m"}`, &sendArgs{}, "target must be a string"},
		{`{"max":1.5}`, &pollArgs{}, "max must be a whole number"},
		{`{"max":"ten"}`, &pollArgs{}, "max must be a whole number"},
		{`{"peek":"yes"}`, &pollArgs{}, "peek must be true or false"},
		{`{"target":"w","message":"m","from":"x"}`, &sendArgs{}, `unknown argument "from": this tool takes message, priority, request_id, target, turn_id, wait_s`},
		{`[1,2]`, &sendArgs{}, "the arguments must be a JSON object of named arguments"},
		{`"text"`, &pollArgs{}, "the arguments must be a JSON object of named arguments"},
	}
	for _, c := range cases {
		r, _ := reqWith([]byte(c.raw))
		err := decodeArgs(r, c.into)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: %v, want %q", c.raw, err, c.want)
			continue
		}
		for _, internal := range []string{"json", "Go ", "struct", "float64", "unmarshal", "pollArgs", "sendArgs"} {
			if strings.Contains(err.Error(), internal) && !strings.Contains(c.want, internal) {
				t.Errorf("%s: %q names %q", c.raw, err, internal)
			}
		}
	}
	var p pollArgs
	r, _ := reqWith([]byte(`{"max":"7","wait_s":"1.5"}`))
	if err := decodeArgs(r, &p); err != nil || p.Max == nil || *p.Max != 7 || p.WaitS == nil || *p.WaitS != 1.5 {
		t.Fatalf("numeric strings: %v, %+v", err, p)
	}
	// as a server gets them: the raw JSON-RPC bytes
	var raw mcpgo.CallToolRequest
	raw.Params.RawArguments = json.RawMessage(`{"max":"8","wait_s":2}`)
	p = pollArgs{}
	if err := decodeArgs(raw, &p); err != nil || *p.Max != 8 || *p.WaitS != 2 {
		t.Fatalf("raw arguments: %v, %+v", err, p)
	}
	raw.Params.RawArguments = json.RawMessage(`{"max":8,"bogus":1}`)
	if err := decodeArgs(raw, &p); err == nil || !strings.HasPrefix(err.Error(), `unknown argument "bogus"`) {
		t.Fatalf("raw arguments with an unknown one: %v", err)
	}
	// invalid UTF-8 is refused, not replaced with U+FFFD on the way in
	var sa sendArgs
	raw.Params.RawArguments = json.RawMessage("{\"target\":\"w\",\"message\":\"ok \xff\"}")
	if err := decodeArgs(raw, &sa); err == nil || !strings.Contains(err.Error(), "not valid UTF-8") {
		t.Fatalf("invalid UTF-8: %v, %+v", err, sa)
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
