//go:build !race

package bridge_test

// raceEnabled: see race_on_test.go.
const raceEnabled = false
