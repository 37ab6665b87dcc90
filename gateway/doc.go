// Package gateway is the per-host gateway of SPEC §1: it opens a host's
// state (the transport — a broker or the embedded one —, the store, the
// host key and trust ring, the audit log), starts the bridge core on it,
// wires herdr (the forward path into panes, pane status, reminders,
// spawn), and serves MCP over HTTP (loopback, or any address with TLS),
// its Prometheus metrics beside it (/metrics, package metrics) and the
// local admin socket. It owns both ends of the admin-socket
// protocol (Dial, Ask and Relay are its client side) and the loading of
// the configuration file.
//
// Lifecycle: Open (state opened, listeners bound, nothing served) → Run
// (every goroutine the gateway owns, under one errgroup, until its ctx
// ends or Close) → Close (idempotent). cmd/herdbridge turns flags into a
// Config; gateway/gatewaytest starts real gateways in-process for tests.
//
// It may import bridge and its transports, mcp, metrics, herdr and keys; nothing
// imports it but cmd and tests. It holds no message semantics: those are
// the core's.
package gateway
