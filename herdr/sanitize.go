package herdr

import (
	"strings"
	"unicode/utf8"
)

// Sanitize makes text safe to type into a terminal: it removes ESC and the
// other C0 control characters except newline and tab, DEL, and the C1
// controls (U+0080–U+009F, which some terminals treat as ESC sequences);
// turns CRLF, lone CR and the Unicode line and paragraph separators
// (U+2028, U+2029) into LF; and replaces invalid UTF-8. A brief can then
// neither end a bracketed paste early (ESC[201~), nor move the cursor, nor
// press keys the agent did not mean to, and every line break a reader of
// the prompt may see is a newline, where QuoteOwnLines looks for lines
// that start like ours (the model reads U+2028 as a line break too).
func Sanitize(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteRune(utf8.RuneError)
		case r == '\r':
			b.WriteByte('\n')
			if i < len(s) && s[i] == '\n' {
				i++
			}
		case r == '\u2028' || r == '\u2029':
			b.WriteByte('\n')
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
			// dropped
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
