package mcp

import (
	"encoding/json"
	"strings"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// plainSchemas rewrites t's input and output schemas so that every property
// has one plain type: the schema generator types an optional (pointer) field
// as ["null","number"] and a slice as ["null","array"], and clients that map
// a schema onto a single-type dialect then mistype or drop the argument
// (one sends wait_s as a string). An optional argument is simply left out,
// never sent as null, and results never carry a null (omitempty, non-nil
// slices), so dropping "null" says the same thing more portably.
func plainSchemas(t mcpgo.Tool) mcpgo.Tool {
	if t.RawInputSchema != nil {
		var in mcpgo.ToolInputSchema // keeps the properties' order
		if err := json.Unmarshal(t.RawInputSchema, &in); err == nil {
			plainTypes(in.Properties)
			t.InputSchema = in
			t.RawInputSchema = nil
		}
	}
	plainTypes(t.OutputSchema.Properties)
	return t
}

// fillCap writes the configured wait cap where t's argument descriptions
// say {cap}: struct tags are constant, --max-wait is not.
func fillCap(t mcpgo.Tool, cap string) mcpgo.Tool {
	for _, p := range t.InputSchema.Properties {
		if m, ok := p.(map[string]any); ok {
			if d, ok := m["description"].(string); ok {
				m["description"] = strings.ReplaceAll(d, "{cap}", cap)
			}
		}
	}
	return t
}

// plainTypes drops "null" from every type array under v, leaving a single
// type as a plain string.
func plainTypes(v any) {
	switch v := v.(type) {
	case map[string]any:
		if ts, ok := v["type"].([]any); ok {
			var keep []any
			for _, t := range ts {
				if t != "null" {
					keep = append(keep, t)
				}
			}
			if len(keep) == 1 {
				v["type"] = keep[0]
			} else {
				v["type"] = keep
			}
		}
		for _, sub := range v {
			plainTypes(sub)
		}
	case []any:
		for _, sub := range v {
			plainTypes(sub)
		}
	}
}
