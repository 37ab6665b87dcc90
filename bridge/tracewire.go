package bridge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/google/uuid"
)

// The bodies of TRACE and TRACE_ANSWER: what another host sends this
// gateway on its control queue, so parsed strictly (both have a fuzz
// target). The envelope around them is verified first.

// TraceRequest is the body of a TRACE: the id whose hops are wanted.
type TraceRequest struct {
	ID string `json:"id"` // a traceId or msgId
}

// traceRequestBytes bounds a TRACE body (it carries one id).
const traceRequestBytes = 4 << 10

// traceFieldBytes bounds each text field of a hop in an answer.
const traceFieldBytes = 1 << 10

// ParseTraceRequest decodes and checks a TRACE body: one JSON object whose
// id is a UUID (returned in canonical form).
func ParseTraceRequest(body []byte) (TraceRequest, error) {
	var r TraceRequest
	if len(body) > traceRequestBytes {
		return r, fmt.Errorf("TRACE body of %d bytes (at most %d)", len(body), traceRequestBytes)
	}
	if err := decodeStrict(body, &r); err != nil {
		return TraceRequest{}, fmt.Errorf("TRACE body: %w", err)
	}
	if !isUUID(r.ID) {
		return TraceRequest{}, fmt.Errorf("TRACE id %s is not a UUID", Clip(r.ID))
	}
	r.ID = uuid.MustParse(r.ID).String()
	return r, nil
}

// ParseTraceAnswer decodes and checks a TRACE_ANSWER body: at most
// TraceMaxHops hops, each with UUID ids where it has them and text fields
// of valid UTF-8 within traceFieldBytes. Its Host is not taken from the
// body (the envelope's signed host says who answered).
func ParseTraceAnswer(body []byte) (TraceHost, error) {
	var th TraceHost
	if err := decodeStrict(body, &th); err != nil {
		return TraceHost{}, fmt.Errorf("TRACE_ANSWER body: %w", err)
	}
	if len(th.Hops) > TraceMaxHops {
		return TraceHost{}, fmt.Errorf("TRACE_ANSWER with %d hops (at most %d)", len(th.Hops), TraceMaxHops)
	}
	if len(th.Scope.Files) > 2 {
		return TraceHost{}, fmt.Errorf("TRACE_ANSWER scope names %d files (at most 2)", len(th.Scope.Files))
	}
	texts := append([]string{th.Error}, th.Scope.Files...)
	for i, r := range th.Hops {
		if err := checkTraceHop(r); err != nil {
			return TraceHost{}, fmt.Errorf("TRACE_ANSWER hop %d: %w", i, err)
		}
	}
	for _, s := range texts {
		if len(s) > traceFieldBytes || !utf8.ValidString(s) {
			return TraceHost{}, errors.New("TRACE_ANSWER: a text field is over 1 KiB or not UTF-8")
		}
	}
	if th.Hops == nil {
		th.Hops = []AuditRecord{}
	}
	th.Host = ""
	return th, nil
}

// checkTraceHop holds one hop of an answer to what this build writes.
func checkTraceHop(r AuditRecord) error {
	for _, id := range []string{r.MsgID, r.TraceID, r.Corr} {
		if id != "" && !isUUID(id) {
			return fmt.Errorf("id %s is not a UUID", Clip(id))
		}
	}
	for _, s := range []string{r.Dir, string(r.Hop), string(r.Kind), r.From, r.To, r.Host, r.Key, r.Entity, r.Verdict} {
		if len(s) > traceFieldBytes || !utf8.ValidString(s) {
			return errors.New("a text field is over 1 KiB or not UTF-8")
		}
	}
	if r.LatencyMs < 0 || r.LatencyMs > 1e12 {
		return fmt.Errorf("latency %v ms out of range", r.LatencyMs)
	}
	return nil
}

// decodeStrict decodes one JSON value into v, refusing anything after it.
// Unknown fields are ignored: a newer gateway may add some.
func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the JSON object")
	}
	return nil
}
