// Package benchreport turns one `make bench` run into BENCHMARKS.md: the
// standard `go test -bench` output (custom metrics included), the load
// tool's JSON and the machine it ran on become one table of issue 15's
// targets, each figure next to its baseline from the same run, as a
// ratio, met or missed, with the engineer's notes on each miss.
//
// It owns the list of targets (targets.go) and nothing else: it runs no
// benchmark and imports nothing of the product, so a report can be
// rendered again from a recorded run (bench-out/).
package benchreport
