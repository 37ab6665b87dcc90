// Package history keeps per-entity transcripts on disk: one file of JSON
// lines per entity (<name>.jsonl, mode 0600) in one directory, appended by
// one writer goroutine from a bounded queue, kept within a byte cap and an
// age cap by compaction, and read back whole. It knows no bridge
// semantics — which messages are kept, whose names they carry and who may
// read them are the core's (bridge/history.go, historyread.go): records
// in, records out. It imports nothing of this module, so the core can
// depend on it freely.
package history
