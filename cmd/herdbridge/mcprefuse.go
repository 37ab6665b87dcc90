package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// refusalCode is the JSON-RPC error code of a refused `herdbridge mcp`
// (the spec's internal error: the server cannot serve at all).
const refusalCode = -32603

// refuseMCP is what `herdbridge mcp` does when it cannot start (no name,
// the name held by a live session, no gateway): an MCP client that starts
// a stdio server which simply exits shows the person "Connection closed"
// and nothing else (Claude Code 2.1.328: "✘ Failed to connect —
// CONNECTION_CLOSED", the stderr only in its debug log). So it says why on
// stderr, then, when a client is on the other end of stdin (not a
// terminal), answers every request it sends with a JSON-RPC error carrying
// the sentence until the client hangs up: Claude Code shows an error on
// initialize as the server's status ("✘ Failed to connect — -32603: …" in
// claude mcp list, "Issue: …" in claude mcp get and /mcp). The command
// still fails: the error is returned for the exit status.
func refuseMCP(why error, stdin io.Reader, stdout, stderr io.Writer) error {
	msg := "herdbridge mcp cannot start: " + why.Error()
	fmt.Fprintln(stderr, msg) // now, not at exit: the client reads stderr while it runs
	if f, ok := stdin.(*os.File); ok {
		if st, err := f.Stat(); err != nil || st.Mode()&os.ModeCharDevice != 0 {
			return &reportedError{why} // a person at a terminal: the line on stderr is the answer
		}
	}
	answerRefusals(msg, stdin, stdout)
	return &reportedError{why}
}

// reportedError is an error already written to stderr: main exits 1
// without writing it again.
type reportedError struct{ err error }

func (e *reportedError) Error() string { return e.err.Error() }
func (e *reportedError) Unwrap() error { return e.err }

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
			"error": map[string]any{"code": refusalCode, "message": msg},
		})
		if _, err := out.Write(append(line, '\n')); err != nil {
			return
		}
	}
}
