package fakemodel

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

// conversation is a Messages request as Claude Code sends it after two
// tool calls: a system-reminder before the prompt, a string result and a
// list-of-blocks error result.
const conversation = `{"model":"claude-x","stream":%s,"tools":[{"name":"Bash"},{"name":"mcp__hb__bridge_poll"}],
"messages":[
 {"role":"user","content":[{"type":"text","text":"<system-reminder>\nnoise\n</system-reminder>\n"},{"type":"text","text":"do it"}]},
 {"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"mcp__hb__bridge_roster","input":{}}]},
 {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"{\"entities\":[]}"}]},
 {"role":"assistant","content":[{"type":"tool_use","id":"t2","name":"mcp__hb__bridge_poll","input":{}}]},
 {"role":"user","content":[{"type":"tool_result","tool_use_id":"t2","is_error":true,"content":[{"type":"text","text":"no"},{"type":"text","text":"really"}]}]}
]}`

func TestAnthropicStream(t *testing.T) {
	rec := &Record{}
	script := func(tr Turn) Step {
		return Step{ToolCalls: []ToolCall{{Name: "mcp__hb__bridge_send", Args: map[string]any{"target": "w", "wait_s": 5}}}}
	}
	srv := httptest.NewServer(NewAnthropic(script, rec))
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/messages?beta=true", "application/json", strings.NewReader(strings.Replace(conversation, "%s", "true", 1)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var events []string
	var input, stop string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type  string
			Delta struct {
				Type        string
				PartialJSON string `json:"partial_json"`
				StopReason  string `json:"stop_reason"`
			}
			ContentBlock struct{ Type, Name string } `json:"content_block"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event %s: %v", data, err)
		}
		events = append(events, ev.Type)
		if ev.Type == "content_block_start" && (ev.ContentBlock.Type != "tool_use" || ev.ContentBlock.Name != "mcp__hb__bridge_send") {
			t.Errorf("block start %+v", ev.ContentBlock)
		}
		input += ev.Delta.PartialJSON
		if ev.Delta.StopReason != "" {
			stop = ev.Delta.StopReason
		}
	}
	want := []string{"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if !reflect.DeepEqual(events, want) || stop != "tool_use" || input != `{"target":"w","wait_s":5}` {
		t.Errorf("events %v, stop %q, input %s", events, stop, input)
	}
	turns := rec.Turns()
	if len(turns) != 1 {
		t.Fatalf("%d turns recorded", len(turns))
	}
	wantTurn := Turn{Prompt: "do it", Tools: []string{"Bash", "mcp__hb__bridge_poll"}, Results: []Seen{
		{Tool: "mcp__hb__bridge_roster", Content: `{"entities":[]}`},
		{Tool: "mcp__hb__bridge_poll", Content: "no\nreally", IsError: true},
	}}
	if !reflect.DeepEqual(turns[0], wantTurn) {
		t.Errorf("turn %+v\nwant %+v", turns[0], wantTurn)
	}
}

// TestAnthropicJSON: the non-stream retry gets one message; a text step
// ends the turn; a request offering no tools (a side call) is answered
// without the script and not recorded; the probe and count_tokens answer;
// anything else is a 404 the server lists.
func TestAnthropicJSON(t *testing.T) {
	rec := &Record{}
	calls := 0
	api := NewAnthropic(func(Turn) Step { calls++; return Step{Text: "all done"} }, rec)
	srv := httptest.NewServer(api)
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/messages", "application/json", strings.NewReader(strings.Replace(conversation, "%s", "false", 1)))
	if err != nil {
		t.Fatal(err)
	}
	var msg struct {
		Content []struct{ Type, Text string }
		Stop    string `json:"stop_reason"`
		Model   string
	}
	err = json.NewDecoder(resp.Body).Decode(&msg)
	resp.Body.Close()
	if err != nil || msg.Stop != "end_turn" || len(msg.Content) != 1 || msg.Content[0].Text != "all done" || msg.Model != "claude-x" {
		t.Errorf("message %+v (%v)", msg, err)
	}
	side, _ := http.Post(srv.URL+"/v1/messages", "application/json", strings.NewReader(`{"model":"h","messages":[{"role":"user","content":"title?"}]}`))
	side.Body.Close()
	for _, c := range []struct{ method, path string }{{"HEAD", "/api/hello"}, {"POST", "/v1/messages/count_tokens"}, {"GET", "/v1/models"}} {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader("{}"))
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if want := map[bool]int{true: 404, false: 200}[c.path == "/v1/models"]; r.StatusCode != want {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, r.StatusCode, want)
		}
	}
	if calls != 1 || len(rec.Turns()) != 1 || !reflect.DeepEqual(api.Unknown(), []string{"GET /v1/models"}) {
		t.Errorf("script called %d times, %d turns, unknown %v", calls, len(rec.Turns()), api.Unknown())
	}
}
