package herdrtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// SchemaFile is where, relative to the module root, the repository keeps its
// copy of the JSON Schema shipped with herdr 0.8.2 (`herdr api schema --json`).
const SchemaFile = "testdata/herdr-api.schema.json"

// Validator checks wire lines against herdr's JSON Schema (draft 2020-12).
// The schema document holds five sub-schemas under "schemas": request,
// success_response, error_response, event and subscription_event. A
// Validator is safe for concurrent use.
type Validator struct {
	path     string
	protocol int
	methods  []string

	request, success, failure, event, subEvent *jsonschema.Schema

	// Single branches of the big oneOf lists, used only to make an error
	// message short and to the point once the full schema said no.
	requestBranch map[string]*jsonschema.Schema // by method
	resultBranch  map[string]*jsonschema.Schema // by result.type
	eventBranch   map[string]*jsonschema.Schema // by data.type
}

// NewValidator loads and compiles the schema file at path.
func NewValidator(path string) (*Validator, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("herdrtest: read schema: %w", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("herdrtest: parse schema %s: %w", path, err)
	}
	var shape struct {
		Protocol int `json:"protocol"`
		Schemas  struct {
			Request struct {
				OneOf []struct {
					Properties struct {
						Method struct {
							Const string `json:"const"`
						} `json:"method"`
					} `json:"properties"`
				} `json:"oneOf"`
			} `json:"request"`
			Success struct {
				Defs struct {
					ResponseResult struct {
						OneOf []constType `json:"oneOf"`
					} `json:"ResponseResult"`
				} `json:"$defs"`
			} `json:"success_response"`
			Event struct {
				Defs struct {
					EventData struct {
						OneOf []constType `json:"oneOf"`
					} `json:"EventData"`
				} `json:"$defs"`
			} `json:"event"`
		} `json:"schemas"`
	}
	if err := json.Unmarshal(raw, &shape); err != nil {
		return nil, fmt.Errorf("herdrtest: schema %s has an unexpected shape: %w", path, err)
	}

	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	base := "file://" + filepath.ToSlash(abs)
	c := jsonschema.NewCompiler()
	if err := c.AddResource(base, doc); err != nil {
		return nil, fmt.Errorf("herdrtest: add schema: %w", err)
	}
	compile := func(ptr string) (*jsonschema.Schema, error) {
		s, err := c.Compile(base + "#" + ptr)
		if err != nil {
			return nil, fmt.Errorf("herdrtest: compile %s: %w", ptr, err)
		}
		return s, nil
	}
	v := &Validator{
		path:          path,
		protocol:      shape.Protocol,
		requestBranch: map[string]*jsonschema.Schema{},
		resultBranch:  map[string]*jsonschema.Schema{},
		eventBranch:   map[string]*jsonschema.Schema{},
	}
	for _, t := range []struct {
		dst **jsonschema.Schema
		ptr string
	}{
		{&v.request, "/schemas/request"},
		{&v.success, "/schemas/success_response"},
		{&v.failure, "/schemas/error_response"},
		{&v.event, "/schemas/event"},
		{&v.subEvent, "/schemas/subscription_event"},
	} {
		if *t.dst, err = compile(t.ptr); err != nil {
			return nil, err
		}
	}
	for i, b := range shape.Schemas.Request.OneOf {
		m := b.Properties.Method.Const
		if m == "" {
			continue
		}
		v.methods = append(v.methods, m)
		if v.requestBranch[m], err = compile(fmt.Sprintf("/schemas/request/oneOf/%d", i)); err != nil {
			return nil, err
		}
	}
	for i, b := range shape.Schemas.Success.Defs.ResponseResult.OneOf {
		if b.Properties.Type.Const == "" {
			continue
		}
		if v.resultBranch[b.Properties.Type.Const], err = compile(fmt.Sprintf("/schemas/success_response/$defs/ResponseResult/oneOf/%d", i)); err != nil {
			return nil, err
		}
	}
	for i, b := range shape.Schemas.Event.Defs.EventData.OneOf {
		if b.Properties.Type.Const == "" {
			continue
		}
		if v.eventBranch[b.Properties.Type.Const], err = compile(fmt.Sprintf("/schemas/event/$defs/EventData/oneOf/%d", i)); err != nil {
			return nil, err
		}
	}
	if len(v.methods) == 0 {
		return nil, fmt.Errorf("herdrtest: schema %s lists no request methods", path)
	}
	return v, nil
}

type constType struct {
	Properties struct {
		Type struct {
			Const string `json:"const"`
		} `json:"type"`
	} `json:"properties"`
}

// DefaultSchemaPath finds SchemaFile: first relative to this package's source
// directory (../../testdata), then by walking up from the working directory
// to the directory that holds go.mod.
func DefaultSchemaPath() (string, error) {
	var tried []string
	if _, file, _, ok := runtime.Caller(0); ok {
		p := filepath.Join(filepath.Dir(file), "..", "..", filepath.FromSlash(SchemaFile))
		if _, err := os.Stat(p); err == nil {
			return filepath.Clean(p), nil
		}
		tried = append(tried, p)
	}
	dir, err := os.Getwd()
	if err == nil {
		for {
			p := filepath.Join(dir, filepath.FromSlash(SchemaFile))
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
			tried = append(tried, p)
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				break
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", fmt.Errorf("herdrtest: %s not found (tried %s)", SchemaFile, strings.Join(tried, ", "))
}

var (
	defaultOnce      sync.Once
	defaultValidator *Validator
	defaultErr       error
)

// DefaultValidator returns a process-wide Validator for DefaultSchemaPath,
// compiled once.
func DefaultValidator() (*Validator, error) {
	defaultOnce.Do(func() {
		p, err := DefaultSchemaPath()
		if err != nil {
			defaultErr = err
			return
		}
		defaultValidator, defaultErr = NewValidator(p)
	})
	return defaultValidator, defaultErr
}

// Path is the schema file this Validator was loaded from.
func (v *Validator) Path() string { return v.path }

// Protocol is the protocol number the schema document declares (20).
func (v *Validator) Protocol() int { return v.protocol }

// Methods lists every request method the schema knows, in schema order.
func (v *Validator) Methods() []string { return append([]string(nil), v.methods...) }

// HasMethod reports whether the schema defines the request method m.
func (v *Validator) HasMethod(m string) bool { _, ok := v.requestBranch[m]; return ok }

func parseLine(line []byte) (any, map[string]any, error) {
	line = bytes.TrimRight(line, "\r\n")
	if bytes.IndexByte(line, '\n') >= 0 {
		return nil, nil, errors.New("line contains an embedded newline")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
	if err != nil {
		return nil, nil, fmt.Errorf("not a single JSON value: %w", err)
	}
	obj, _ := doc.(map[string]any)
	return doc, obj, nil
}

// ValidateRequest checks one request line ({"id","method","params"})
// against schemas.request. A trailing newline is allowed.
func (v *Validator) ValidateRequest(line []byte) error {
	doc, obj, err := parseLine(line)
	if err != nil {
		return err
	}
	if err := v.request.Validate(doc); err != nil {
		if m, ok := obj["method"].(string); ok {
			if b := v.requestBranch[m]; b != nil {
				if berr := b.Validate(doc); berr != nil {
					return fmt.Errorf("request %q: %w", m, berr)
				}
			} else {
				return fmt.Errorf("request: unknown method %q", m)
			}
		}
		return fmt.Errorf("request: %w", err)
	}
	return nil
}

// ValidateResponse checks one reply line: a line with "error" against
// schemas.error_response, anything else against schemas.success_response.
// A line carrying both "result" and "error" is rejected.
func (v *Validator) ValidateResponse(line []byte) error {
	doc, obj, err := parseLine(line)
	if err != nil {
		return err
	}
	if obj == nil {
		return errors.New("response is not a JSON object")
	}
	_, hasErr := obj["error"]
	_, hasRes := obj["result"]
	switch {
	case hasErr && hasRes:
		return errors.New("response has both result and error")
	case hasErr:
		if err := v.failure.Validate(doc); err != nil {
			return fmt.Errorf("error response: %w", err)
		}
		return nil
	}
	if err := v.success.Validate(doc); err != nil {
		if res, ok := obj["result"].(map[string]any); ok {
			if t, ok := res["type"].(string); ok {
				b := v.resultBranch[t]
				if b == nil {
					return fmt.Errorf("success response: unknown result type %q", t)
				}
				if berr := b.Validate(res); berr != nil {
					return fmt.Errorf("success response %q: %w", t, berr)
				}
			}
		}
		return fmt.Errorf("success response: %w", err)
	}
	return nil
}

// ValidateEvent checks one pushed event line. Dotted event names
// ("pane.agent_status_changed") are checked against
// schemas.subscription_event, snake_case ones ("pane_created") against
// schemas.event.
func (v *Validator) ValidateEvent(line []byte) error {
	doc, obj, err := parseLine(line)
	if err != nil {
		return err
	}
	if obj == nil {
		return errors.New("event is not a JSON object")
	}
	name, _ := obj["event"].(string)
	if strings.Contains(name, ".") {
		if err := v.subEvent.Validate(doc); err != nil {
			return fmt.Errorf("subscription event %q: %w", name, err)
		}
		return nil
	}
	if data, ok := obj["data"].(map[string]any); ok {
		if t, ok := data["type"].(string); ok && t != name {
			return fmt.Errorf("event %q carries data.type %q", name, t)
		}
	}
	if err := v.event.Validate(doc); err != nil {
		if data, ok := obj["data"].(map[string]any); ok {
			if t, ok := data["type"].(string); ok {
				if b := v.eventBranch[t]; b != nil {
					if berr := b.Validate(data); berr != nil {
						return fmt.Errorf("event %q: %w", name, berr)
					}
				}
			}
		}
		return fmt.Errorf("event %q: %w", name, err)
	}
	return nil
}
