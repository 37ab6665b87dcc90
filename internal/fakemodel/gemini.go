package fakemodel

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
)

// Gemini is a scripted stand-in for the Gemini API (generativelanguage
// v1beta) as Gemini CLI calls it with GOOGLE_GEMINI_BASE_URL and an API key:
// streamGenerateContent (SSE) answers from the script with functionCall
// parts; generateContent and countTokens, which the CLI calls for its own
// bookkeeping (routing, next-speaker checks, compression), get neutral
// answers. Every request's path is kept, so a test can say what the CLI
// called.
type Gemini struct {
	*httptest.Server
	Record
	script Script

	mu    sync.Mutex
	paths []string
}

// NewGemini starts a Gemini API server answering from script. Point Gemini
// CLI at it with GOOGLE_GEMINI_BASE_URL=URL and any GEMINI_API_KEY.
func NewGemini(script Script) *Gemini {
	g := &Gemini{script: script}
	g.Server = httptest.NewServer(http.HandlerFunc(g.serve))
	return g
}

// Paths returns every request's method and path (with the query), in order.
func (g *Gemini) Paths() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.paths...)
}

// geminiRequest is the part of a GenerateContentRequest the script reads.
type geminiRequest struct {
	Contents []geminiContent `json:"contents"`
	Tools    []struct {
		FunctionDeclarations []struct {
			Name string `json:"name"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	GenerationConfig struct {
		ResponseMimeType string `json:"responseMimeType"`
	} `json:"generationConfig"`
}

type geminiContent struct {
	Role  string       `json:"role"`
	Parts []geminiPart `json:"parts"`
}

type geminiPart struct {
	Text             string          `json:"text,omitempty"`
	FunctionCall     json.RawMessage `json:"functionCall,omitempty"`
	FunctionResponse *struct {
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse,omitempty"`
}

func (g *Gemini) serve(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	g.paths = append(g.paths, r.Method+" "+r.URL.RequestURI())
	g.mu.Unlock()
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req geminiRequest
	if r.Method == http.MethodPost && json.Unmarshal(body, &req) != nil {
		http.Error(w, "not a JSON request", http.StatusBadRequest)
		return
	}
	switch {
	case strings.HasSuffix(r.URL.Path, ":streamGenerateContent"):
		g.stream(w, req)
	case strings.HasSuffix(r.URL.Path, ":generateContent"):
		writeJSON(w, geminiResponse(g.internalAnswer(req)))
	case strings.HasSuffix(r.URL.Path, ":countTokens"):
		writeJSON(w, map[string]any{"totalTokens": len(body) / 4})
	default:
		http.Error(w, `{"error":{"code":404,"message":"not served by the fake model","status":"NOT_FOUND"}}`, http.StatusNotFound)
	}
}

// stream answers the conversation turn from the script, as one SSE event.
func (g *Gemini) stream(w http.ResponseWriter, req geminiRequest) {
	t := geminiTurn(req)
	g.add(t)
	step := g.script(t)
	var parts []map[string]any
	for _, c := range step.ToolCalls {
		args := c.Args
		if args == nil {
			args = map[string]any{}
		}
		parts = append(parts, map[string]any{"functionCall": map[string]any{"name": c.Name, "args": args}})
	}
	if len(step.ToolCalls) == 0 {
		parts = []map[string]any{{"text": step.Text}}
	}
	raw, err := json.Marshal(geminiResponse(parts))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprintf(w, "data: %s\r\n\r\n", raw)
}

// internalAnswer is what a non-streaming call gets: the CLI asks these for
// itself (a JSON verdict such as "who speaks next", or a summary), never
// for the conversation's tool calls, so the script does not see them.
func (g *Gemini) internalAnswer(req geminiRequest) []map[string]any {
	if req.GenerationConfig.ResponseMimeType == "application/json" {
		return []map[string]any{{"text": `{"reasoning":"the scripted model is done","next_speaker":"user","model_choice":"flash","complexity_reasoning":"scripted","complexity_score":1}`}}
	}
	return []map[string]any{{"text": "ok"}}
}

func geminiResponse(parts []map[string]any) map[string]any {
	return map[string]any{
		"candidates": []any{map[string]any{
			"content":      map[string]any{"role": "model", "parts": parts},
			"finishReason": "STOP",
			"index":        0,
		}},
		"usageMetadata": map[string]any{"promptTokenCount": 10, "candidatesTokenCount": 10, "totalTokenCount": 20},
		"modelVersion":  "fake-gemini",
	}
}

// geminiTurn reads the prompt, the offered tools and every functionResponse
// (its response object verbatim, as the model gets it) from a request.
func geminiTurn(req geminiRequest) Turn {
	var t Turn
	for _, c := range req.Contents {
		var text []string
		for _, p := range c.Parts {
			if p.FunctionResponse != nil {
				t.Results = append(t.Results, Seen{Tool: p.FunctionResponse.Name, Content: string(p.FunctionResponse.Response)})
			} else if p.Text != "" {
				text = append(text, p.Text)
			}
		}
		if c.Role == "user" && len(text) > 0 {
			t.Prompt = strings.Join(text, "\n") // the latest user text: the CLI may send context first
		}
	}
	for _, tl := range req.Tools {
		for _, d := range tl.FunctionDeclarations {
			t.Tools = append(t.Tools, d.Name)
		}
	}
	return t
}
