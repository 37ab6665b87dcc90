package herdrtest_test

import (
	"strings"
	"testing"

	"github.com/herdbridge/herdbridge/herdr/herdrtest"
)

// Lines from API.md §1.3 and §6 must validate; broken ones must not.
func TestValidator(t *testing.T) {
	t.Parallel()
	v, err := herdrtest.DefaultValidator()
	if err != nil {
		t.Fatal(err)
	}
	if v.Protocol() != 20 || !v.HasMethod("agent.prompt") || len(v.Methods()) < 80 {
		t.Fatalf("schema: protocol %d, %d methods", v.Protocol(), len(v.Methods()))
	}
	p, _ := herdrtest.DefaultSchemaPath()
	if !strings.HasSuffix(p, herdrtest.SchemaFile) {
		t.Fatalf("schema path %s", p)
	}
	good := map[string][]string{
		"request": {
			`{"id":"req_1","method":"ping","params":{}}`,
			`{"id":"8","method":"agent.prompt","params":{"target":"reviewer","text":"Review the diff","wait":{"until":["idle","done"],"timeout_ms":120000}}}`,
			`{"id":"5","method":"pane.send_input","params":{"pane_id":"w1:p1","text":"echo delta","keys":["enter"]}}`,
			`{"id":"12","method":"events.wait","params":{"match_event":{"event":"pane_agent_status_changed","pane_id":"w1:p2","agent_status":"blocked"},"timeout_ms":1000}}`,
			`{"id":"sub","method":"events.subscribe","params":{"subscriptions":[{"type":"pane.created"},{"type":"pane.closed"},{"type":"pane.agent_status_changed","pane_id":"w1:p2"},{"type":"pane.output_matched","pane_id":"w1:p1","source":"recent","lines":40,"match":{"type":"regex","value":"passed|failed"}}]}}`,
			`{"id":"16","method":"agent.start","params":{"name":"reviewer","kind":"claude","pane_id":"w1:p5","args":["--model","opus"],"timeout_ms":30000}}`,
			`{"id":"19","method":"pane.report_agent","params":{"pane_id":"w1:p6","source":"custom:my-agent","agent":"my-agent","state":"working","message":"building","seq":1}}` + "\n",
		},
		"response": {
			`{"id":"req_1","result":{"type":"pong","version":"0.8.2","protocol":20,"capabilities":{"live_handoff":true,"detached_server_daemon":true}}}`,
			`{"id":"req_1","error":{"code":"pane_not_found","message":"pane w1:p9 not found"}}`,
			`{"id":"4","result":{"type":"agent_info","agent":{"terminal_id":"term_6a1f9c","name":"reviewer","agent":"claude","agent_status":"idle","workspace_id":"w1","tab_id":"w1:t1","pane_id":"w1:p2","focused":false,"interactive_ready":true,"state_change_seq":7,"cwd":"/repo","revision":41}}}`,
			`{"id":"9","result":{"type":"pane_read","read":{"pane_id":"w1:p1","workspace_id":"w1","tab_id":"w1:t1","source":"recent_unwrapped","format":"text","text":"$ echo delta\ndelta\n$ ","revision":0,"truncated":false}}}`,
			`{"id":"12","result":{"type":"wait_matched","event":{"event":"pane_agent_status_changed","data":{"type":"pane_agent_status_changed","pane_id":"w1:p2","workspace_id":"w1","agent_status":"blocked","agent":"claude"}}}}`,
			`{"id":"sub","result":{"type":"subscription_started"}}`,
		},
		"event": {
			`{"event":"pane.agent_status_changed","data":{"pane_id":"w1:p2","workspace_id":"w1","agent_status":"working","agent":"claude"}}`,
			`{"event":"pane_closed","data":{"type":"pane_closed","pane_id":"w1:p3","workspace_id":"w1"}}`,
		},
	}
	bad := map[string][]string{
		"request": {
			`{"id":1,"method":"ping","params":{}}`,
			`{"jsonrpc":"2.0","id":"1","method":"pane.list"}`,
			`{"id":"1","method":"pane.read","params":{"pane_id":"w1:p1","source":"recent-unwrapped"}}`,
			`{"id":"1","method":"agent.send","params":{"target":"a","text":"x"}}`,
			`{"id":"1","method":"ping","params":{}} trailing`,
		},
		"response": {
			`{"id":"1","result":{"type":"pong","version":"0.8.2"}}`,
			`{"id":"1","result":{"type":"agent_info","agent":{"agent_status":"idle"}}}`,
			`{"id":"1","error":{"code":"timeout"}}`,
			`{"id":"1","result":{"type":"ok"},"error":{"code":"x","message":"y"}}`,
			`{"id":"1","result":{"type":`,
		},
		"event": {
			`{"event":"pane_closed","data":{"type":"pane_closed","pane_id":"w1:p3"}}`,
			`{"event":"pane_created","data":{"type":"pane_closed","pane_id":"w1:p3","workspace_id":"w1"}}`,
			`{"event":"pane.agent_status_changed","data":{"pane_id":"w1:p2","agent_status":"busy"}}`,
		},
	}
	check := map[string]func([]byte) error{"request": v.ValidateRequest, "response": v.ValidateResponse, "event": v.ValidateEvent}
	for kind, lines := range good {
		for _, l := range lines {
			if err := check[kind]([]byte(l)); err != nil {
				t.Errorf("%s should validate: %v\n%s", kind, err, l)
			}
		}
	}
	for kind, lines := range bad {
		for _, l := range lines {
			if err := check[kind]([]byte(l)); err == nil {
				t.Errorf("%s should not validate:\n%s", kind, l)
			}
		}
	}
	if _, err := herdrtest.NewValidator("does/not/exist.json"); err == nil {
		t.Error("missing schema file accepted")
	}
}
