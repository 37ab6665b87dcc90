package herdr

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestDecodeReply(t *testing.T) {
	cases := []struct {
		line    string
		want    []string
		errIs   error
		proto   bool
		wantErr bool
	}{
		{line: `{"id":"a","result":{"type":"pong","version":"0.8.2","protocol":20}}`, want: []string{"pong"}},
		{line: `{"id":"a","error":{"code":"pane_not_found","message":"pane w1:p9 not found"}}`, errIs: ErrPaneNotFound},
		{line: `{"id":"","error":{"code":"invalid_request","message":"invalid request: unknown variant ` + "`agent.prompt`" + `"}}`, errIs: ErrUnknownMethod},
		{line: `{"id":"b","result":{"type":"pong"}}`, proto: true},                       // wrong id
		{line: `{"id":"a","result":{"type":"ok"}}`, want: []string{"pong"}, proto: true}, // wrong type
		{line: `{"id":"a"}`, proto: true},
		{line: `{"id":1,"result":{"type":"ok"}}`, proto: true},
		{line: `not json`, proto: true},
		{line: `{"id":"a","result":{}}`, proto: true},
		{line: `{"id":"a","error":{"message":"no code"}}`, proto: true},
	}
	for _, c := range cases {
		_, err := decodeReply([]byte(c.line), "ping", "a", c.want...)
		var pe *ProtocolError
		switch {
		case c.errIs != nil:
			if !errors.Is(err, c.errIs) {
				t.Errorf("%s: err %v, want %v", c.line, err, c.errIs)
			}
		case c.proto:
			if !errors.As(err, &pe) {
				t.Errorf("%s: err %v, want a ProtocolError", c.line, err)
			}
		default:
			if err != nil {
				t.Errorf("%s: %v", c.line, err)
			}
		}
	}
}

func FuzzDecodeReply(f *testing.F) {
	for _, s := range []string{
		`{"id":"a","result":{"type":"pong","version":"0.8.2","protocol":20}}`,
		`{"id":"a","error":{"code":"timeout","message":"x"}}`,
		`{"id":"a","result":{"type":"agent_info","agent":{"pane_id":"w1:p1","agent_status":"idle","state_change_seq":3}}}`,
		`{"id":"","error":{"code":"invalid_request","message":"unknown variant"}}`, `{}`, `[]`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		res, err := decodeReply(line, "agent.get", "a")
		if err == nil && len(res) == 0 {
			t.Fatal("success without a result")
		}
		var out struct {
			Agent AgentInfo `json:"agent"`
		}
		if err == nil {
			_ = json.Unmarshal(res, &out)
		}
	})
}

func FuzzDecodeEvent(f *testing.F) {
	for _, s := range []string{
		`{"event":"pane_closed","data":{"type":"pane_closed","pane_id":"w1:p3","workspace_id":"w1"}}`,
		`{"event":"pane.agent_status_changed","data":{"pane_id":"w1:p2","workspace_id":"w1","agent_status":"working"}}`,
		`{"event":"pane_created","data":{"type":"pane_created","pane":{"pane_id":"w1:p3","agent_status":"unknown"}}}`,
		`{"event":""}`, `{}`, `x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		ev, err := decodeEvent(line)
		if err == nil && ev.Name == "" {
			t.Fatal("event without a name accepted")
		}
	})
}
