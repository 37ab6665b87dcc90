//go:build !race

package memnettest

// raceEnabled: see race_on_test.go.
const raceEnabled = false
