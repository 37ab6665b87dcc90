package mcp

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

var update = flag.Bool("update", false, "rewrite testdata/tools.golden.json")

// TestToolSchemasGolden snapshots the tools as clients see them: a changed
// schema is a deliberate, reviewed change (go test ./mcp -run
// TestToolSchemasGolden -update). The tool definitions do not depend on
// the core, so a server without one lists them to an in-process client.
func TestToolSchemasGolden(t *testing.T) {
	c, err := client.NewInProcessClient(New(nil, nil).MCP())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcpgo.InitializeRequest{}
	init.Params.ProtocolVersion = mcpgo.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcpgo.Implementation{Name: "herdbridge-test", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	res, err := c.ListTools(ctx, mcpgo.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(res.Tools, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "tools.golden.json")
	if *update {
		if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if strings.TrimSpace(string(want)) != strings.TrimSpace(string(got)) {
		t.Fatalf("tool schemas changed; review and run with -update:\n%s", got)
	}
}

// TestToolSchemasArePlain: every property of every input and output schema
// has one plain type (no type arrays, no nullable unions), so clients that
// map schemas onto a single-type dialect send numbers as numbers; the
// optional numbers are typed number/integer.
func TestToolSchemasArePlain(t *testing.T) {
	var tools []map[string]any
	for _, td := range New(nil, nil).tools() {
		raw, err := json.Marshal(td.Tool)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		tools = append(tools, m)
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if ty, ok := v["type"]; ok {
				if _, plain := ty.(string); !plain {
					if _, isSchema := ty.(map[string]any); !isSchema { // a property named "type"
						t.Errorf("%s: type %v is not one plain type", path, ty)
					}
				}
			}
			for _, k := range []string{"anyOf", "oneOf", "nullable"} {
				if _, ok := v[k]; ok {
					t.Errorf("%s: has %s", path, k)
				}
			}
			for k, sub := range v {
				walk(path+"."+k, sub)
			}
		case []any:
			for i, sub := range v {
				walk(path+"["+strconv.Itoa(i)+"]", sub)
			}
		}
	}
	want := map[string]string{"bridge_send.wait_s": "number", "bridge_poll.wait_s": "number", "bridge_poll.max": "integer", "bridge_ask.timeout_s": "number"}
	for _, tool := range tools {
		name := tool["name"].(string)
		walk(name+".inputSchema", tool["inputSchema"])
		walk(name+".outputSchema", tool["outputSchema"])
		props, _ := tool["inputSchema"].(map[string]any)["properties"].(map[string]any)
		for p, schema := range props {
			if ty, ok := want[name+"."+p]; ok {
				if got := schema.(map[string]any)["type"]; got != ty {
					t.Errorf("%s.%s: type %v, want %s", name, p, got, ty)
				}
				delete(want, name+"."+p)
			}
		}
	}
	if len(want) > 0 {
		t.Errorf("arguments missing from the schemas: %v", want)
	}
}
