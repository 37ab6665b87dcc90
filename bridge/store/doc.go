// Package store is the gateway's own durable state, kept in one bbolt file
// (state.db in the state directory): the local entity registry with its
// token hashes, the forward path's ledger of briefs awaiting receipts and
// briefs being typed, the per-pane queues of briefs waiting to be typed,
// the open turns of asks on both sides, remembered request ids, the
// seen-set and sender bindings that verification remembers across
// restarts, and the log of dead letters this gateway consumed. It is not
// the transport's store (bridge/embedded keeps the
// messages) and it knows no bridge semantics: records in, records out.
//
// It is the only package besides bridge/embedded that imports bbolt, and it
// imports nothing of this module, so the core can depend on it freely.
package store
