// Probes for bench/notes.md, a module of their own so the product does not
// depend on golang.org/x/exp (tracewake reads execution traces with it).
module github.com/herdbridge/herdbridge/bench/probe

go 1.26.0

require golang.org/x/exp v0.0.0-20261120182113-8801fbdfac81
