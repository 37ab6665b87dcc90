package fakemodel

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestGeminiScriptAndRecord: the server answers streamGenerateContent with
// the script's functionCall as one SSE event, records the functionResponse
// object byte for byte, the latest user text as the prompt and the
// declared tools, and answers the CLI's own generateContent calls without
// showing them to the script.
func TestGeminiScriptAndRecord(t *testing.T) {
	g := NewGemini(Sequence("all done", ToolCall{Name: "mcp_herdbridge_bridge_roster"}, ToolCall{Name: "mcp_herdbridge_bridge_send", Args: map[string]any{"target": "w"}}))
	defer g.Close()
	first := `{"contents":[{"role":"user","parts":[{"text":"<session_context>ctx</session_context>"}]},{"role":"user","parts":[{"text":"list the roster"}]}],
		"tools":[{"functionDeclarations":[{"name":"read_file"},{"name":"mcp_herdbridge_bridge_roster"}]}]}`
	if call := geminiStream(t, g.URL, first); call != `{"args":{},"name":"mcp_herdbridge_bridge_roster"}` {
		t.Errorf("first answer %s", call)
	}
	resp := `{"output":"<untrusted_context>\nlead@h1  primary\n</untrusted_context>"}`
	second := `{"contents":[{"role":"user","parts":[{"text":"list the roster"}]},{"role":"model","parts":[{"functionCall":{"name":"mcp_herdbridge_bridge_roster","args":{}}}]},
		{"role":"user","parts":[{"functionResponse":{"id":"c1","name":"mcp_herdbridge_bridge_roster","response":` + resp + `}}]}]}`
	if call := geminiStream(t, g.URL, second); call != `{"args":{"target":"w"},"name":"mcp_herdbridge_bridge_send"}` {
		t.Errorf("second answer %s", call)
	}
	r, err := http.Post(g.URL+"/v1beta/models/flash-lite:generateContent", "application/json", strings.NewReader(`{"contents":[],"generationConfig":{"responseMimeType":"application/json"}}`))
	if err != nil || r.StatusCode != 200 {
		t.Fatalf("generateContent: %v %v", r, err)
	}
	r.Body.Close()
	turns := g.Turns()
	if len(turns) != 2 {
		t.Fatalf("%d turns recorded, want the 2 streamed ones", len(turns))
	}
	if turns[0].Prompt != "list the roster" || strings.Join(turns[0].Tools, ",") != "read_file,mcp_herdbridge_bridge_roster" {
		t.Errorf("first turn %+v", turns[0])
	}
	if got := g.LastResults(); len(got) != 1 || got[0].Tool != "mcp_herdbridge_bridge_roster" || got[0].Content != resp {
		t.Errorf("recorded %+v, want the response object verbatim: %s", got, resp)
	}
	if p := g.Paths(); len(p) != 3 || p[0] != "POST /v1beta/models/m:streamGenerateContent?alt=sse" {
		t.Errorf("paths %q", p)
	}
}

// geminiStream posts one streamGenerateContent request and returns the
// functionCall of its single SSE event (or its text).
func geminiStream(t *testing.T, url, body string) string {
	t.Helper()
	r, err := http.Post(url+"/v1beta/models/m:streamGenerateContent?alt=sse", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	if ct := r.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	var events []string
	sc := bufio.NewScanner(r.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "data: "); ok {
			events = append(events, d)
		}
	}
	if len(events) != 1 {
		t.Fatalf("%d SSE events, want 1", len(events))
	}
	var ev struct {
		Candidates []struct {
			Content struct {
				Parts []struct {
					Text         string          `json:"text"`
					FunctionCall json.RawMessage `json:"functionCall"`
				} `json:"parts"`
			} `json:"content"`
			FinishReason string `json:"finishReason"`
		} `json:"candidates"`
	}
	if err := json.Unmarshal([]byte(events[0]), &ev); err != nil || len(ev.Candidates) != 1 || len(ev.Candidates[0].Content.Parts) != 1 {
		t.Fatalf("event %s: %v", events[0], err)
	}
	p := ev.Candidates[0].Content.Parts[0]
	if p.FunctionCall != nil {
		return string(p.FunctionCall)
	}
	return p.Text
}
