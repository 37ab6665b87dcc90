package bridge

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Limits on what callers hand the core. Every one is in the README's
// limits table; an input over one is a UserError that says which limit and
// echoes at most a short, quoted prefix of what was sent.
const (
	MaxNameBytes   = 64  // entity names (nameRE)
	MaxGroupBytes  = 63  // group names (groupRE)
	MaxGroups      = 32  // groups per entity
	MaxPaneIDBytes = 128 // herdr pane ids
	// MaxTargetBytes bounds a target string: the longest valid one is
	// name@host (64+1+63 bytes); a gid is 36.
	MaxTargetBytes = 256
	// echoBytes is the most of a caller's string an error repeats.
	echoBytes = 64
)

// Clip quotes s for an error message, cut to its first echoBytes bytes
// (on a rune boundary) and saying how long it was when cut.
func Clip(s string) string {
	if len(s) <= echoBytes {
		return strconv.Quote(s)
	}
	cut := echoBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(s[:cut]), len(s))
}

// looksLikeGID reports whether s has the form of a gid (any UUID form): a
// name of that form could be taken for another entity's gid.
func looksLikeGID(s string) bool {
	_, err := uuid.Parse(s)
	return err == nil
}

// checkName refuses a name that cannot name a new entity.
func checkName(n string) error {
	if !ValidName(n) {
		return userErr("name %s is not valid: use letters, digits, '.', '_' or '-' (at most %d bytes, no '@')", Clip(n), MaxNameBytes)
	}
	if looksLikeGID(n) {
		return userErr("name %s looks like a gid (a UUID): names may not, so a gid always means one entity; pick another name", Clip(n))
	}
	return nil
}

// checkPaneID refuses a pane id that is too long or not printable text.
func checkPaneID(p string) error {
	if len(p) > MaxPaneIDBytes {
		return userErr("pane id %s is %d bytes, over the %d-byte limit", Clip(p), len(p), MaxPaneIDBytes)
	}
	if !utf8.ValidString(p) {
		return userErr("pane id %s is not UTF-8", Clip(p))
	}
	for _, r := range p {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return userErr("pane id %s holds a space or control character: use printable text", Clip(p))
		}
	}
	return nil
}

// checkTarget refuses a target string no entity can have.
func checkTarget(t string) error {
	if len(t) > MaxTargetBytes {
		return userErr("target %s is %d bytes, over the %d-byte limit: name an entity (name, name@host or gid); bridge_roster lists them", Clip(t), len(t), MaxTargetBytes)
	}
	return nil
}

// checkText refuses a body that is not UTF-8 or has nothing to read: only
// whitespace, control or format characters (a body of NUL bytes).
func checkText(what, s string) error {
	if !utf8.ValidString(s) {
		i := 0
		for i < len(s) {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			i += n
		}
		return userErr("%s is not valid UTF-8 (bad byte at offset %d): send text", what, i)
	}
	if strings.IndexFunc(s, func(r rune) bool { return unicode.IsGraphic(r) && !unicode.IsSpace(r) }) < 0 {
		return userErr("%s is empty: it has no visible text (only whitespace or control characters)", what)
	}
	return nil
}

// checkBody checks a message body against Config.MaxMessageBytes and
// checkText.
func (c *Core) checkBody(msg string) error {
	if len(msg) > c.cfg.MaxMessageBytes {
		return userErr("message is %d bytes, over the %d-byte limit: shorten it or write it to a file and send the path", len(msg), c.cfg.MaxMessageBytes)
	}
	return checkText("message", msg)
}
