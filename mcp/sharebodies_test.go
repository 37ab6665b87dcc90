package mcp

import (
	"slices"
	"testing"
	"unsafe"

	"github.com/herdbridge/herdbridge/bridge"
)

// A result's structuredContent bodies are slices of its text, not a second
// copy of them, and still read the same: a result of 4 MiB of bodies holds
// 4 MiB of them, not 8, for as long as its reader takes.
func TestStructuredBodiesShareTheText(t *testing.T) {
	msgs := []bridge.Message{
		{MsgID: "a", Kind: "REPLY", FromName: "w", Body: "first body"},
		{MsgID: "b", Kind: "SEND", FromName: "p", TurnID: "t1", Body: "second\nbody with <<<end-x>>> in it"},
		{MsgID: "c", Kind: "FAILED", From: "gid", Body: "é漢🙂 third"},
	}
	r := &bridge.Result{Status: "drained", Messages: slices.Clone(msgs), Next: "call again"}
	text, at := summaryAt(r)
	shareBodies(r.Messages, text, at)
	lo := uintptr(unsafe.Pointer(unsafe.StringData(text)))
	hi := lo + uintptr(len(text))
	for i, m := range r.Messages {
		if m.Body != msgs[i].Body {
			t.Fatalf("message %d's body reads %q after sharing, want %q", i, m.Body, msgs[i].Body)
		}
		if p := uintptr(unsafe.Pointer(unsafe.StringData(m.Body))); p < lo || p >= hi {
			t.Fatalf("message %d's body is a copy, not a slice of the text", i)
		}
	}
	_, bodies := readFenced(t, text)
	if len(bodies) != len(msgs) {
		t.Fatalf("the text fences %d bodies, want %d", len(bodies), len(msgs))
	}
	for i, b := range bodies {
		if b != msgs[i].Body {
			t.Fatalf("fenced body %d is %q, want %q", i, b, msgs[i].Body)
		}
	}
}
