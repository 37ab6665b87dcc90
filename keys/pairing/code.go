package pairing

import (
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
)

// alphabet is Crockford's base32: no I, L, O or U, so a code read aloud or
// copied by eye survives; ParseCode maps the look-alikes back.
const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// Code lengths: CodeLen characters, the first NameplateLen of them public.
const (
	CodeLen      = 8
	NameplateLen = 2
)

// Code is a one-time pairing code, normalized: CodeLen characters of
// alphabet, no separator.
type Code string

// String is the code as shown to people: "ABCD-EFGH".
func (c Code) String() string {
	if len(c) != CodeLen {
		return string(c)
	}
	return string(c[:4]) + "-" + string(c[4:])
}

// Nameplate is the public part of the code: it names the meeting place on
// the broker and is not secret.
func (c Code) Nameplate() string { return string(c[:NameplateLen]) }

// NewCode returns a fresh random code.
func NewCode() (Code, error) {
	var b [CodeLen]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("pairing: generating a code: %w", err)
	}
	for i := range b {
		b[i] = alphabet[b[i]&31] // 256 is a multiple of 32: uniform
	}
	return Code(b[:]), nil
}

// ParseCode accepts a code as a person types it: any case, with dashes or
// spaces anywhere, O for 0 and I or L for 1. It never panics; an error says
// what is wrong.
func ParseCode(s string) (Code, error) {
	if len(s) > 64 {
		return "", errors.New("pairing: that is not a pairing code: too long (a code is 8 characters, like ABCD-EFGH)")
	}
	var b strings.Builder
	for _, r := range strings.ToUpper(s) {
		switch r {
		case '-', ' ', '\t':
			continue
		case 'O':
			r = '0'
		case 'I', 'L':
			r = '1'
		}
		if r > 0x7f || strings.IndexRune(alphabet, r) < 0 {
			return "", fmt.Errorf("pairing: %q is not a pairing code: %q is not one of its characters (0-9 and A-Z without U)", s, r)
		}
		b.WriteRune(r)
	}
	if b.Len() != CodeLen {
		return "", fmt.Errorf("pairing: %q is not a pairing code: it has %d characters, a code has %d (like ABCD-EFGH)", s, b.Len(), CodeLen)
	}
	return Code(b.String()), nil
}
