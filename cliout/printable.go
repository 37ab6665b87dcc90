// Package cliout is what herdbridge's commands print from the gateway's
// answers: the roster, stats, trace and dead-letter tables, doctor's
// checks. Text another host or a broker publisher wrote goes through
// Printable, so it cannot steer the operator's terminal.
package cliout

import (
	"strings"
	"unicode"
)

// Printable keeps what another host sent from steering the terminal:
// control characters become '?'.
func Printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return '?'
		}
		return r
	}, s)
}
