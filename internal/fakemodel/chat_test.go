package fakemodel

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestChatScriptAndRecord: the server streams the script's tool call as
// Chat Completions chunks (tool_calls, then finish_reason tool_calls, then
// [DONE]), and records each tool message's content as the model sees it,
// named by the assistant's call it answers, whether the content is a
// string or a list of text parts.
func TestChatScriptAndRecord(t *testing.T) {
	c := NewChat(Sequence("done", ToolCall{Name: "herdbridge_bridge_poll", Args: map[string]any{"wait_s": 5}}))
	defer c.Close()
	first := `{"model":"scripted","stream":true,"messages":[{"role":"system","content":"sys"},{"role":"user","content":[{"type":"text","text":"poll please"}]}],
		"tools":[{"type":"function","function":{"name":"read"}},{"type":"function","function":{"name":"herdbridge_bridge_poll"}}]}`
	calls, text, finish := chatStream(t, c.URL, first)
	if calls != `[{"function":{"arguments":"{\"wait_s\":5}","name":"herdbridge_bridge_poll"},"id":"call_0_0","index":0,"type":"function"}]` || text != "" || finish != "tool_calls" {
		t.Errorf("first answer calls=%s text=%q finish=%q", calls, text, finish)
	}
	second := `{"messages":[{"role":"user","content":"poll please"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_0_0","type":"function","function":{"name":"herdbridge_bridge_poll","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"call_0_0","content":[{"type":"text","text":"status=pending"},{"type":"text","text":"structuredContent: {}"}]}]}`
	if _, text, finish := chatStream(t, c.URL, second); text != "done" || finish != "stop" {
		t.Errorf("second answer text=%q finish=%q", text, finish)
	}
	turns := c.Turns()
	if len(turns) != 2 || turns[0].Prompt != "poll please" || strings.Join(turns[0].Tools, ",") != "read,herdbridge_bridge_poll" {
		t.Fatalf("turns %+v", turns)
	}
	if got := c.LastResults(); len(got) != 1 || got[0].Tool != "herdbridge_bridge_poll" || got[0].Content != "status=pending\nstructuredContent: {}" {
		t.Errorf("recorded %+v", got)
	}
}

// chatStream posts one request and returns the tool_calls JSON, the text
// and the finish reason the stream carried, checking it ends with [DONE].
func chatStream(t *testing.T, url, body string) (calls, text, finish string) {
	t.Helper()
	r, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var last string
	sc := bufio.NewScanner(r.Body)
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		last = d
		var ch struct {
			Choices []struct {
				Delta struct {
					Content   string          `json:"content"`
					ToolCalls json.RawMessage `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if d == "[DONE]" || json.Unmarshal([]byte(d), &ch) != nil {
			continue
		}
		for _, c := range ch.Choices {
			text += c.Delta.Content
			if c.Delta.ToolCalls != nil {
				calls = string(c.Delta.ToolCalls)
			}
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
	}
	if last != "[DONE]" {
		t.Errorf("stream ends with %q, want [DONE]", last)
	}
	return calls, text, finish
}
