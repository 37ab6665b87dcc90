package mcp

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
)

// RefusalCode is the JSON-RPC error code of a refused `herdbridge mcp`
// (the spec's internal error: the server cannot serve at all).
const RefusalCode = -32603

// RefuseStdio answers the MCP client on the other end of stdin (not a
// terminal) with msg: every request it sends gets a JSON-RPC error
// carrying the sentence, until the client hangs up. A client that starts a
// stdio server which simply exits shows the person "Connection closed"
// and nothing else (Claude Code 2.1.328: "✘ Failed to connect —
// CONNECTION_CLOSED", the stderr only in its debug log); an error on
// initialize it shows as the server's status ("✘ Failed to connect —
// -32603: …" in claude mcp list, "Issue: …" in claude mcp get and /mcp).
// On a terminal it returns at once: a person there reads stderr.
func RefuseStdio(msg string, stdin io.Reader, stdout io.Writer) {
	if f, ok := stdin.(*os.File); ok {
		if st, err := f.Stat(); err != nil || st.Mode()&os.ModeCharDevice != 0 {
			return
		}
	}
	answerRefusals(msg, stdin, stdout)
}

// answerRefusals answers every JSON-RPC request on in (a line with an id
// and a method) with the error msg, ignores notifications and responses,
// and returns at end of input or at a line over 1 MiB.
func answerRefusals(msg string, in io.Reader, out io.Writer) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(sc.Bytes(), &req) != nil || req.Method == "" || len(req.ID) == 0 || string(req.ID) == "null" {
			continue
		}
		line, _ := json.Marshal(map[string]any{
			"jsonrpc": "2.0", "id": req.ID,
			"error": map[string]any{"code": RefusalCode, "message": msg},
		})
		if _, err := out.Write(append(line, '\n')); err != nil {
			return
		}
	}
}
