package fakemodel

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// codexRequest is a Responses request shaped as Codex 0.169.0 sends it
// (trimmed): its MCP tools in a namespace per server, the earlier
// function_call with that namespace, and the outputs as a string or as
// content items.
const codexRequest = `{"model":"fake","stream":true,"input":[
 {"type":"message","role":"developer","content":[{"type":"input_text","text":"You are Codex"}]},
 {"type":"message","role":"user","content":[{"type":"input_text","text":"# AGENTS.md instructions"}]},
 {"type":"message","role":"user","content":[{"type":"input_text","text":"call the roster"}]},
 {"type":"function_call","name":"bridge_roster","namespace":"mcp__herdbridge","arguments":"{}","call_id":"c1"},
 {"type":"function_call_output","call_id":"c1","output":"Wall time: 0.01 seconds\nOutput:\n{\"hosts\":[]}"},
 {"type":"function_call","name":"exec_command","arguments":"{}","call_id":"c2"},
 {"type":"function_call_output","call_id":"c2","output":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]}],
 "tools":[{"type":"function","name":"exec_command"},{"type":"namespace","name":"mcp__herdbridge","tools":[{"type":"function","name":"bridge_roster"},{"type":"function","name":"bridge_send"}]},{"type":"web_search"}]}`

// sseEvents reads an event stream into its data objects, in order.
func sseEvents(t *testing.T, body string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(body))
	event := ""
	for sc.Scan() {
		l := sc.Text()
		if e, ok := strings.CutPrefix(l, "event: "); ok {
			event = e
		}
		if d, ok := strings.CutPrefix(l, "data: "); ok {
			var m map[string]any
			if err := json.Unmarshal([]byte(d), &m); err != nil {
				t.Fatalf("data is not JSON: %q", d)
			}
			if m["type"] != event {
				t.Fatalf("event %q carries data of type %v", event, m["type"])
			}
			out = append(out, m)
		}
	}
	return out
}

// TestResponsesRecordsAndCalls: a request is recorded as the model saw
// it (prompt, each tool output verbatim with its tool's full name, the
// offered tools), and the script's call goes out as the events Codex
// parses, a namespaced tool as namespace + name.
func TestResponsesRecordsAndCalls(t *testing.T) {
	rec := &Record{}
	var asked Turn
	s := &Responses{Record: rec, Script: func(tn Turn) Step {
		asked = tn
		return Step{ToolCalls: []ToolCall{{Name: "mcp__herdbridge__bridge_send", Args: map[string]any{"target": "w1"}}}}
	}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	res, err := http.Post(srv.URL+"/v1/responses", "application/json", strings.NewReader(codexRequest))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body strings.Builder
	if _, err := bufio.NewReader(res.Body).WriteTo(&body); err != nil {
		t.Fatal(err)
	}
	if res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("content type %q", res.Header.Get("Content-Type"))
	}
	if asked.Prompt != "call the roster" || len(asked.Results) != 2 {
		t.Fatalf("turn %+v", asked)
	}
	if r := asked.Results[0]; r.Tool != "mcp__herdbridge__bridge_roster" || r.Content != "Wall time: 0.01 seconds\nOutput:\n{\"hosts\":[]}" {
		t.Errorf("first result %+v", r)
	}
	if r := asked.Results[1]; r.Tool != "exec_command" || r.Content != `[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]` {
		t.Errorf("content items must be kept verbatim: %+v", r)
	}
	if got := strings.Join(asked.Tools, ","); got != "exec_command,mcp__herdbridge__bridge_roster,mcp__herdbridge__bridge_send,web_search" {
		t.Errorf("tools %s", got)
	}
	if len(rec.Turns()) != 1 {
		t.Errorf("recorded %d turns", len(rec.Turns()))
	}
	ev := sseEvents(t, body.String())
	var types []string
	for _, e := range ev {
		types = append(types, e["type"].(string))
	}
	if got := strings.Join(types, ","); got != "response.created,response.output_item.added,response.output_item.done,response.completed" {
		t.Fatalf("events %s", got)
	}
	item := ev[2]["item"].(map[string]any)
	if item["type"] != "function_call" || item["namespace"] != "mcp__herdbridge" || item["name"] != "bridge_send" || item["arguments"] != `{"target":"w1"}` || item["call_id"] == "" {
		t.Errorf("function_call %v", item)
	}
	if resp := ev[3]["response"].(map[string]any); resp["id"] == "" || resp["usage"] == nil {
		t.Errorf("response.completed %v", resp)
	}
}

// TestResponsesText: a step with no calls ends the turn with a message,
// streamed as a delta and the finished item; a wrong path is a 404.
func TestResponsesText(t *testing.T) {
	srv := httptest.NewServer(&Responses{Script: func(Turn) Step { return Step{Text: "done"} }})
	defer srv.Close()
	res, err := http.Post(srv.URL+"/v1/responses", "application/json", strings.NewReader(`{"input":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	var body strings.Builder
	_, _ = bufio.NewReader(res.Body).WriteTo(&body)
	res.Body.Close()
	ev := sseEvents(t, body.String())
	if len(ev) != 5 || ev[2]["type"] != "response.output_text.delta" || ev[2]["delta"] != "done" {
		t.Fatalf("events %v", ev)
	}
	content := ev[3]["item"].(map[string]any)["content"].([]any)[0].(map[string]any)
	if content["type"] != "output_text" || content["text"] != "done" {
		t.Errorf("message item %v", ev[3])
	}
	if res, err := http.Get(srv.URL + "/v1/models"); err != nil || res.StatusCode != http.StatusNotFound {
		t.Errorf("GET /v1/models: %v %v", res.StatusCode, err)
	}
}
