package fakemodel

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
)

// Responses is a scripted OpenAI Responses API (POST /v1/responses,
// streamed as server-sent events), the API Codex CLI talks to. Each request
// is decoded into a Turn (the prompt, every function_call_output the CLI
// sent back, the tools it offered), recorded, and answered with the
// script's next Step as the event stream Codex parses: response.created,
// then for each item response.output_item.added and .done (a function_call,
// or a message with its response.output_text.delta), then
// response.completed.
type Responses struct {
	Script Script
	Record *Record
	// Dump, when set, gets every request's method, path and body: how the
	// wire format was found, and what to look at when a CLI update breaks it.
	Dump io.Writer
	seq  atomic.Int64
}

// maxRequestBytes bounds a request body: a conversation of a few tool
// calls is kilobytes; Codex's tool schemas and instructions some tens.
const maxRequestBytes = 8 << 20

func (s *Responses) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	if s.Dump != nil {
		fmt.Fprintf(s.Dump, "%s %s\n%s\n\n", r.Method, r.URL.Path, body)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/responses") {
		http.Error(w, "the fake model serves POST /v1/responses only", http.StatusNotFound)
		return
	}
	t, err := decodeResponsesTurn(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if s.Record != nil {
		s.Record.add(t)
	}
	step := s.Script(t)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	s.stream(w, step, namespaces(body))
}

// responsesRequest is the part of a Responses request the fake reads.
type responsesRequest struct {
	Input []responsesItem `json:"input"`
	Tools []responsesTool `json:"tools"`
}

// responsesItem is one input item: a message, a function_call the model
// made earlier, or the function_call_output the CLI sends back for it.
type responsesItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	Name      string          `json:"name"`
	Namespace string          `json:"namespace"`
	CallID    string          `json:"call_id"`
	Output    json.RawMessage `json:"output"`
}

// responsesTool is one offered tool: a function, or a namespace of them.
type responsesTool struct {
	Type  string          `json:"type"`
	Name  string          `json:"name"`
	Tools []responsesTool `json:"tools"`
}

func decodeResponsesTurn(body []byte) (Turn, error) {
	var req responsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return Turn{}, fmt.Errorf("not a Responses request: %v", err)
	}
	var t Turn
	names := map[string]string{} // call_id → tool name
	for _, it := range req.Input {
		switch it.Type {
		case "message", "":
			if it.Role == "user" {
				t.Prompt = messageText(it.Content) // the last user message is the prompt
			}
		case "function_call":
			names[it.CallID] = it.Name
			if it.Namespace != "" {
				names[it.CallID] = it.Namespace + "__" + it.Name
			}
		case "function_call_output":
			t.Results = append(t.Results, Seen{Tool: names[it.CallID], Content: outputText(it.Output)})
		}
	}
	t.Tools = toolNames(req.Tools)
	return t, nil
}

// messageText is a message's text: a plain string, or its text parts joined.
func messageText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// outputText is a function_call_output as the model reads it: the string
// itself, or (content items) the JSON verbatim.
func outputText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// toolNames lists the offered tools; a namespace's tools are named
// namespace__name ("mcp__herdbridge__bridge_roster"), the name the CLI
// shows its user and a Script calls.
func toolNames(ts []responsesTool) []string {
	var out []string
	for _, t := range ts {
		if t.Type == "namespace" {
			for _, n := range toolNames(t.Tools) {
				out = append(out, t.Name+"__"+n)
			}
			continue
		}
		if t.Name != "" {
			out = append(out, t.Name)
		} else {
			out = append(out, t.Type) // a built-in such as web_search
		}
	}
	return out
}

// namespaces are the tool namespaces a request offered (Codex puts each MCP
// server's tools in one: "mcp__herdbridge" holding "bridge_roster", …).
func namespaces(body []byte) []string {
	var req responsesRequest
	_ = json.Unmarshal(body, &req) // it decoded once already
	var out []string
	for _, t := range req.Tools {
		if t.Type == "namespace" {
			out = append(out, t.Name)
		}
	}
	return out
}

// functionCall is the output item for call c: a name under an offered
// namespace ("mcp__herdbridge__bridge_roster") is sent as that namespace
// and the tool's own name, which is how Codex dispatches it; a model that
// sends the joined name gets "unsupported call".
func functionCall(c ToolCall, ns []string, id, callID string) map[string]any {
	item := map[string]any{"type": "function_call", "id": id, "call_id": callID, "name": c.Name, "arguments": argsJSON(c)}
	for _, n := range ns {
		if rest, ok := strings.CutPrefix(c.Name, n+"__"); ok && rest != "" {
			item["namespace"], item["name"] = n, rest
			break
		}
	}
	return item
}

// stream writes step as one response's events, flushing each.
func (s *Responses) stream(w http.ResponseWriter, step Step, ns []string) {
	n := s.seq.Add(1)
	id := fmt.Sprintf("resp_%d", n)
	send := func(v map[string]any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", v["type"], b)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	send(map[string]any{"type": "response.created", "response": map[string]any{"id": id, "status": "in_progress"}})
	for i, c := range step.ToolCalls {
		item := functionCall(c, ns, fmt.Sprintf("fc_%d_%d", n, i), fmt.Sprintf("call_%d_%d", n, i))
		send(map[string]any{"type": "response.output_item.added", "output_index": i, "item": item})
		send(map[string]any{"type": "response.output_item.done", "output_index": i, "item": item})
	}
	if len(step.ToolCalls) == 0 {
		s.streamText(send, n, step.Text)
	}
	send(map[string]any{"type": "response.completed", "response": map[string]any{"id": id, "status": "completed",
		"usage": map[string]any{"input_tokens": 1, "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": 1, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 2}}})
}

// streamText writes a final assistant message: its delta, then the item.
func (s *Responses) streamText(send func(map[string]any), n int64, text string) {
	msgID := fmt.Sprintf("msg_%d", n)
	send(map[string]any{"type": "response.output_item.added", "output_index": 0,
		"item": map[string]any{"type": "message", "id": msgID, "role": "assistant", "status": "in_progress", "content": []any{}}})
	send(map[string]any{"type": "response.output_text.delta", "item_id": msgID, "output_index": 0, "content_index": 0, "delta": text})
	send(map[string]any{"type": "response.output_item.done", "output_index": 0,
		"item": map[string]any{"type": "message", "id": msgID, "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}})
}
