package main

import (
	"fmt"
	"io"

	"github.com/herdbridge/herdbridge/mcp"
)

// refuseMCP is what `herdbridge mcp` does when it cannot start (no name,
// the name held by a live session, no gateway): it says why on stderr —
// now, not at exit: the client reads stderr while it runs — then answers
// the client's requests with the sentence (mcp.RefuseStdio). The command
// still fails: the error is returned for the exit status.
func refuseMCP(why error, stdin io.Reader, stdout, stderr io.Writer) error {
	msg := "herdbridge mcp cannot start: " + why.Error()
	fmt.Fprintln(stderr, msg)
	mcp.RefuseStdio(msg, stdin, stdout)
	return &reportedError{why}
}

// reportedError is an error already written to stderr: main exits 1
// without writing it again.
type reportedError struct{ err error }

func (e *reportedError) Error() string { return e.err.Error() }
func (e *reportedError) Unwrap() error { return e.err }
