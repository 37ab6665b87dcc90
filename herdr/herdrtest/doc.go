// Package herdrtest is a fake herdr server for tests: it listens on a
// temporary Unix socket and speaks herdr 0.8.2's local socket API (protocol
// 20) — newline-delimited JSON, one request per connection, long waits that
// end when the client half-closes or writes extra bytes — over a simulated
// world of workspaces, tabs and panes whose agents take prompts, work,
// block on dialogs, swallow Enter keys and finish turns.
//
// Created with New(t), the server validates every request it receives and
// every reply and event it sends against herdr's JSON Schema
// (testdata/herdr-api.schema.json); a violation fails the test with the
// offending line. The protocol reference is API.md of the herdr work.
//
// A typical test:
//
//	srv := herdrtest.New(t)                                  // closed by t.Cleanup
//	pane := srv.AddAgent(herdrtest.PaneOptions{Name: "reviewer"})
//	// point the code under test at srv.SocketPath() (HERDR_SOCKET_PATH)
//	// … it prompts "reviewer" …
//	if got := srv.Submitted(pane); len(got) != 1 { … }
//	if d := srv.TypedIntoDialog(pane); len(d) != 0 { … }
package herdrtest
