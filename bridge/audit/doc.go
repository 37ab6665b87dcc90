// Package audit keeps the gateway's audit log: one JSON line (Record) per
// hop of every message, metadata only, appended to a 0600 file by one
// writer goroutine from a bounded queue (log.go), and read back a bounded
// window from its end, with its rotated predecessor, for a trace
// (scan.go). It knows no bridge semantics — which hops there are and what
// a verdict says are the core's (bridge/audit.go converts its events to
// Records and the Records a trace reads back to its own AuditRecord):
// records in, records out. It imports nothing of this module.
package audit
