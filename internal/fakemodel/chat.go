package fakemodel

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
)

// Chat is a scripted stand-in for the OpenAI Chat Completions API
// (POST /v1/chat/completions, streaming), the simplest API pi's custom
// providers speak ("api": "openai-completions" in its models.json).
type Chat struct {
	*httptest.Server
	Record
	script Script
}

// NewChat starts a Chat Completions server answering from script; its base
// URL for a client is URL + "/v1".
func NewChat(script Script) *Chat {
	c := &Chat{script: script}
	c.Server = httptest.NewServer(http.HandlerFunc(c.serve))
	return c
}

type chatRequest struct {
	Messages []chatMessage `json:"messages"`
	Tools    []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tool_calls"`
}

func (c *Chat) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models") {
		writeJSON(w, map[string]any{"object": "list", "data": []any{}})
		return
	}
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.Error(w, `{"error":{"message":"not served by the fake model"}}`, http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	var req chatRequest
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		http.Error(w, `{"error":{"message":"not a JSON request"}}`, http.StatusBadRequest)
		return
	}
	t := chatTurn(req)
	c.add(t)
	step := c.script(t)
	w.Header().Set("Content-Type", "text/event-stream")
	for _, chunk := range chatChunks(step, len(t.Results)) {
		raw, err := json.Marshal(chunk)
		if err != nil {
			return
		}
		fmt.Fprintf(w, "data: %s\n\n", raw)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// chatChunks is step as a stream: the calls (or the text) in one delta,
// then the finish reason and the usage.
func chatChunks(step Step, n int) []map[string]any {
	delta := map[string]any{"role": "assistant"}
	finish := "stop"
	if len(step.ToolCalls) > 0 {
		var calls []any
		for i, tc := range step.ToolCalls {
			calls = append(calls, map[string]any{"index": i, "id": fmt.Sprintf("call_%d_%d", n, i), "type": "function",
				"function": map[string]any{"name": tc.Name, "arguments": argsJSON(tc)}})
		}
		delta["tool_calls"] = calls
		finish = "tool_calls"
	} else {
		delta["content"] = step.Text
	}
	chunk := func(choice map[string]any) map[string]any {
		m := map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": "fake"}
		if choice != nil {
			m["choices"] = []any{choice}
		} else {
			m["choices"] = []any{}
			m["usage"] = map[string]any{"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
		}
		return m
	}
	return []map[string]any{
		chunk(map[string]any{"index": 0, "delta": delta, "finish_reason": nil}),
		chunk(map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish}),
		chunk(nil),
	}
}

// chatTurn reads the prompt, the tools and every tool message (its content
// as the model gets it: a string, or the text of its parts) from a request.
func chatTurn(req chatRequest) Turn {
	var t Turn
	names := map[string]string{}
	for _, m := range req.Messages {
		for _, tc := range m.ToolCalls {
			names[tc.ID] = tc.Function.Name
		}
		switch m.Role {
		case "user":
			t.Prompt = chatText(m.Content)
		case "tool":
			t.Results = append(t.Results, Seen{Tool: names[m.ToolCallID], Content: chatText(m.Content)})
		}
	}
	for _, tl := range req.Tools {
		t.Tools = append(t.Tools, tl.Function.Name)
	}
	return t
}

// chatText is a message's content: a JSON string, or the text parts of an
// array joined (a part that is not text is kept as its JSON).
func chatText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []json.RawMessage
	if json.Unmarshal(raw, &parts) != nil {
		return string(raw)
	}
	var out []string
	for _, p := range parts {
		var tp struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(p, &tp) == nil && tp.Type == "text" {
			out = append(out, tp.Text)
		} else {
			out = append(out, string(p))
		}
	}
	return strings.Join(out, "\n")
}
