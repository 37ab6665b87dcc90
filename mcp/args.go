package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"unicode/utf8"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// maxArgBytes bounds the raw arguments of one call (messages have their own,
// smaller limit in the core).
const maxArgBytes = 1 << 20

// decodeArgs decodes tool arguments strictly: unknown arguments and wrong
// types are errors the model can fix, worded as plain sentences (never Go
// or JSON internals). A number sent as a numeric string ("5") is taken as
// the number: some clients send every argument as text.
func decodeArgs(req mcpgo.CallToolRequest, v any) error {
	var raw []byte
	if len(req.Params.RawArguments) > 0 {
		raw = req.Params.RawArguments
	} else {
		var err error
		if raw, err = json.Marshal(req.Params.Arguments); err != nil {
			return errors.New("the arguments could not be read: send a JSON object of named arguments")
		}
	}
	if len(raw) > maxArgBytes {
		return fmt.Errorf("the arguments are %d bytes, over the %d-byte limit: send a shorter message", len(raw), maxArgBytes)
	}
	if !utf8.Valid(raw) {
		// decoding would replace the bad bytes silently: the message the
		// recipient read would not be the one sent
		return errors.New("the arguments are not valid UTF-8: send text (binary data must be encoded, e.g. base64)")
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	var obj map[string]json.RawMessage
	if raw[0] != '{' || json.Unmarshal(raw, &obj) != nil {
		return errors.New("the arguments must be a JSON object of named arguments")
	}
	fields := argFields(reflect.TypeOf(v).Elem())
	if numbersFromStrings(obj, fields) {
		raw, _ = json.Marshal(obj) // RawMessages that were valid JSON
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return plainArgErr(err, fields)
	}
	return nil
}

// argField is one argument a tool takes: its name and the kind of value.
type argField struct {
	name string
	kind reflect.Kind // after pointers
}

// argFields lists the JSON arguments of the args struct t, in order.
func argFields(t reflect.Type) []argField {
	var out []argField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		out = append(out, argField{name: name, kind: ft.Kind()})
	}
	return out
}

func isNumberKind(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// numbersFromStrings replaces in obj every numeric argument that arrived
// as a string holding a JSON number ("5", " 2.5 ") by that number, and
// reports whether it replaced any; anything else is left for the strict
// decoder to refuse.
func numbersFromStrings(obj map[string]json.RawMessage, fields []argField) bool {
	changed := false
	for _, f := range fields {
		val, ok := obj[f.name]
		if !ok || !isNumberKind(f.kind) || len(val) == 0 || val[0] != '"' {
			continue
		}
		var s string
		if json.Unmarshal(val, &s) != nil {
			continue
		}
		s = strings.TrimSpace(s)
		if s == "" || !(s[0] == '-' || s[0] >= '0' && s[0] <= '9') || !json.Valid([]byte(s)) {
			continue
		}
		obj[f.name] = json.RawMessage(s)
		changed = true
	}
	return changed
}

// plainArgErr turns a decoding error into a sentence naming the argument
// and what it takes.
func plainArgErr(err error, fields []argField) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		name := te.Field
		for _, f := range fields {
			if f.name == name {
				return fmt.Errorf("%s must be %s", name, kindWords(f.kind))
			}
		}
		if name == "" {
			return errors.New("the arguments must be a JSON object of named arguments")
		}
		return fmt.Errorf("%s has a value of the wrong type", name)
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		names := make([]string, 0, len(fields))
		for _, f := range fields {
			names = append(names, f.name)
		}
		sort.Strings(names)
		return fmt.Errorf("unknown argument %s: this tool takes %s", name, strings.Join(names, ", "))
	}
	return errors.New("the arguments could not be read: send a JSON object of named arguments")
}

// kindWords says in words what a value of kind k is.
func kindWords(k reflect.Kind) string {
	switch {
	case k == reflect.Float32 || k == reflect.Float64:
		return "a number"
	case isNumberKind(k):
		return "a whole number"
	case k == reflect.Bool:
		return "true or false"
	case k == reflect.String:
		return "a string"
	}
	return "a value of another type"
}
