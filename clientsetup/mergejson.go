package clientsetup

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
)

func marshalJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	err := enc.Encode(v)
	return b.Bytes(), err
}

// mergeJSON sets mcpServers.herdbridge in a JSON config and keeps every
// other key and server as it was (values byte for byte; keys come out
// sorted, as encoding/json writes maps).
func mergeJSON(old []byte, e any) ([]byte, error) {
	doc := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(old)) > 0 {
		if err := json.Unmarshal(old, &doc); err != nil {
			return nil, fmt.Errorf("not a JSON object (%v): fix or move it, nothing was changed", err)
		}
	}
	servers := map[string]json.RawMessage{}
	if raw, ok := doc["mcpServers"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &servers); err != nil {
			return nil, fmt.Errorf("mcpServers is not an object (%v): nothing was changed", err)
		}
	}
	entry, err := marshalJSON(e)
	if err != nil {
		return nil, err
	}
	servers["herdbridge"] = entry
	if doc["mcpServers"], err = marshalJSON(servers); err != nil {
		return nil, err
	}
	out, err := marshalJSON(doc)
	if err != nil {
		return nil, err
	}
	if len(old) > 0 && jsonEqual(old, out) {
		return old, nil // nothing to change: keep the file as it is, formatting included
	}
	return out, nil
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}
