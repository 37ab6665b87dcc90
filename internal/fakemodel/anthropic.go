package fakemodel

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
)

// Anthropic is the Anthropic Messages API as Claude Code calls it (found by
// logging what `claude -p` 2.1.328 sends): HEAD /api/hello (a connectivity
// probe), POST /v1/messages with stream true (SSE) and, when a stream
// fails, the same request again with stream false (one JSON message), and
// POST /v1/messages/count_tokens. Requests that offer the model tools go to
// the script and are recorded; requests without tools are Claude Code's side
// calls (titles, summaries) and get a short text, unrecorded, so the script
// sees only the conversation.
type Anthropic struct {
	Script Script
	Record *Record

	ids     atomic.Int64
	mu      sync.Mutex
	unknown []string // requests no handler knew, "METHOD path"
}

// NewAnthropic serves script and records into rec.
func NewAnthropic(script Script, rec *Record) *Anthropic {
	return &Anthropic{Script: script, Record: rec}
}

// Unknown lists the requests the server answered 404 ("METHOD path"), so a
// test can tell a new CLI version started calling something else.
func (a *Anthropic) Unknown() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.unknown...)
}

func (a *Anthropic) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/api/hello":
		w.WriteHeader(http.StatusOK)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages/count_tokens":
		writeJSON(w, map[string]any{"input_tokens": 1})
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
		a.messages(w, r)
	default:
		a.mu.Lock()
		a.unknown = append(a.unknown, r.Method+" "+r.URL.Path)
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"not_found_error","message":"the fake model does not serve this"}}`)
	}
}

// anthropicRequest is the part of a Messages request the fake reads.
type anthropicRequest struct {
	Model    string             `json:"model"`
	Stream   bool               `json:"stream"`
	Messages []anthropicMessage `json:"messages"`
	Tools    []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"` // a string or a list of blocks
}

type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	ToolUseID string          `json:"tool_use_id"`
	IsError   bool            `json:"is_error"`
	Content   json.RawMessage `json:"content"`
}

func (a *Anthropic) messages(w http.ResponseWriter, r *http.Request) {
	var req anthropicRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
		return
	}
	var step Step
	if len(req.Tools) == 0 {
		step = Step{Text: "ok"}
	} else {
		t := anthropicTurn(req)
		a.Record.add(t)
		step = a.Script(t)
	}
	blocks := a.blocks(step)
	stop := "end_turn"
	if len(step.ToolCalls) > 0 {
		stop = "tool_use"
	}
	if req.Stream {
		streamAnthropic(w, req.Model, blocks, stop)
		return
	}
	writeJSON(w, map[string]any{
		"id": "msg_fake", "type": "message", "role": "assistant", "model": req.Model,
		"content": blocks, "stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]int{"input_tokens": 1, "output_tokens": 1},
	})
}

// blocks renders a step as the response's content blocks.
func (a *Anthropic) blocks(s Step) []map[string]any {
	var out []map[string]any
	if s.Text != "" || len(s.ToolCalls) == 0 {
		out = append(out, map[string]any{"type": "text", "text": s.Text})
	}
	for _, c := range s.ToolCalls {
		id := fmt.Sprintf("toolu_fake%04d", a.ids.Add(1))
		out = append(out, map[string]any{"type": "tool_use", "id": id, "name": c.Name, "input": json.RawMessage(argsJSON(c))})
	}
	return out
}

// anthropicTurn reads a request as the script's Turn: the first user text
// that is not a <system-reminder>, every tool_result in order (named by
// the tool_use it answers), and the offered tools.
func anthropicTurn(req anthropicRequest) Turn {
	var t Turn
	for _, tool := range req.Tools {
		t.Tools = append(t.Tools, tool.Name)
	}
	names := map[string]string{} // tool_use id → tool name
	for _, m := range req.Messages {
		for _, b := range messageBlocks(m.Content) {
			switch {
			case b.Type == "tool_use":
				names[b.ID] = b.Name
			case b.Type == "tool_result":
				t.Results = append(t.Results, Seen{Tool: names[b.ToolUseID], Content: resultContent(b.Content), IsError: b.IsError})
			case b.Type == "text" && m.Role == "user" && t.Prompt == "" && !strings.HasPrefix(b.Text, "<system-reminder>"):
				t.Prompt = b.Text
			}
		}
	}
	return t
}

func messageBlocks(raw json.RawMessage) []anthropicBlock {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []anthropicBlock{{Type: "text", Text: s}}
	}
	var bs []anthropicBlock
	_ = json.Unmarshal(raw, &bs)
	return bs
}

// resultContent is a tool_result's content as the model reads it: the
// string itself, or the text blocks joined by newlines, with any other
// block (an image, a tool_reference) as its JSON.
func resultContent(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var bs []json.RawMessage
	if json.Unmarshal(raw, &bs) != nil {
		return string(raw)
	}
	parts := make([]string, 0, len(bs))
	for _, b := range bs {
		var tb struct{ Type, Text string }
		if json.Unmarshal(b, &tb) == nil && tb.Type == "text" {
			parts = append(parts, tb.Text)
			continue
		}
		parts = append(parts, string(b))
	}
	return strings.Join(parts, "\n")
}

// streamAnthropic writes the blocks as the Messages SSE stream: a text block
// as one text_delta, a tool_use as one input_json_delta of its input.
func streamAnthropic(w http.ResponseWriter, model string, blocks []map[string]any, stop string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	event := func(name string, data map[string]any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
	}
	event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_fake", "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]int{"input_tokens": 1, "output_tokens": 1},
	}})
	for i, b := range blocks {
		start, delta := map[string]any{}, map[string]any{}
		for k, v := range b {
			start[k] = v
		}
		if b["type"] == "text" {
			start["text"] = ""
			delta = map[string]any{"type": "text_delta", "text": b["text"]}
		} else {
			start["input"] = map[string]any{}
			delta = map[string]any{"type": "input_json_delta", "partial_json": string(b["input"].(json.RawMessage))}
		}
		event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": start})
		event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": delta})
		event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]int{"output_tokens": 1}})
	event("message_stop", map[string]any{"type": "message_stop"})
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
