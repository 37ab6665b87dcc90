// Package fakemodel serves small local stand-ins for the model APIs the real
// agent CLIs call (Anthropic Messages, OpenAI Responses, Gemini
// streamGenerateContent, …), answering with scripted tool calls and recording
// every tool result exactly as the model would see it. The CLIs under test
// are the real npm packages; only the model is fake, because no model API is
// reachable here. Each API's wire format lives in its own file; they share
// the script and the record below.
package fakemodel

import (
	"encoding/json"
	"sync"
)

// ToolCall is one call the scripted model makes: a tool name as the CLI
// exposes it (e.g. "mcp__herdbridge__bridge_roster") and its arguments.
type ToolCall struct {
	Name string
	Args map[string]any
}

// Step is the model's next answer: tool calls to make, or (when ToolCalls is
// empty) a final text that ends the turn.
type Step struct {
	ToolCalls []ToolCall
	Text      string
}

// Seen is one tool result as the model received it: the tool's name (when the
// API says it) and the content the CLI put in front of the model, verbatim.
type Seen struct {
	Tool    string
	Content string
	IsError bool // the API marked it an error (Anthropic's is_error)
}

// Turn is what a script decides from: the user's prompt and every tool result
// of the conversation so far, oldest first.
type Turn struct {
	Prompt  string
	Results []Seen
	Tools   []string // the tool names the CLI offered the model this request
}

// Script answers one model request. It is called once per request the CLI
// makes, so it must derive its position from Turn (e.g. len(t.Results)).
type Script func(t Turn) Step

// Record keeps every Turn the server was asked, for the test to read back.
type Record struct {
	mu    sync.Mutex
	turns []Turn
}

func (r *Record) add(t Turn) {
	r.mu.Lock()
	r.turns = append(r.turns, t)
	r.mu.Unlock()
}

// Turns returns a copy of the requests seen so far.
func (r *Record) Turns() []Turn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Turn(nil), r.turns...)
}

// LastResults returns the tool results of the latest request.
func (r *Record) LastResults() []Seen {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.turns) == 0 {
		return nil
	}
	return append([]Seen(nil), r.turns[len(r.turns)-1].Results...)
}

// Sequence is a Script that makes calls[i] once i tool results have come
// back, one call per step, then ends the turn with done.
func Sequence(done string, calls ...ToolCall) Script {
	return func(t Turn) Step {
		if i := len(t.Results); i < len(calls) {
			return Step{ToolCalls: []ToolCall{calls[i]}}
		}
		return Step{Text: done}
	}
}

// argsJSON renders a call's arguments as the APIs carry them (a JSON object).
func argsJSON(c ToolCall) string {
	if c.Args == nil {
		return "{}"
	}
	b, err := json.Marshal(c.Args)
	if err != nil {
		return "{}"
	}
	return string(b)
}
