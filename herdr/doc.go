// Package herdr is the client of herdr's socket API and everything the
// gateway does in herdr panes:
//
//   - [Client] speaks herdr's line protocol (usable at its zero value, with
//     a Dial override); its errors match sentinels through [Error.Is].
//   - [Injector] is the forward path into worker panes: it implements
//     bridge.Injector, which the bridge core calls after it acked a brief
//     (ack first, then the status-gated inject, then INJECTED or FAILED to
//     the sender), and types only [Sanitize]d text.
//   - [Watcher] follows the panes of local entities (live agent status,
//     closed panes) and reports them to the core.
//   - [PaneNudger] types a one-line reminder into a primary's pane when
//     messages are held for it and it is idle.
//   - [Spawner] starts a configured [Profile] in a new pane and waits until
//     its agent is ready.
//
// It imports bridge only for the types of those interfaces; the message
// semantics are the core's. herdrtest is the fake herdr the tests run
// against.
package herdr
