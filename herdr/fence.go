package herdr

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/herdbridge/herdbridge/bridge"
)

// The fence around a brief typed into a pane (issue 23). The model in the
// pane reads herdbridge's header and the sender's text as one prompt, so
// the sender's text must not be able to pass for herdbridge's words:
//
//   - the header names a fresh random nonce and says the sender's text runs
//     up to the closing fence line "[herdbridge] end of brief NONCE"; the
//     sender cannot know the nonce, so no text of its can close the fence
//     early and speak as herdbridge after it (not even a homoglyph of our
//     mark: the nonce is what the model is told to look for);
//   - every line of the sender's text that starts like our own lines —
//     past blanks and invisible characters, "[herdbridge" in any case — gets
//     "(quoted) " put in front (QuoteOwnLines), so no typed line of the body even
//     looks like a header or a fence. Nothing else of the text changes.

// nonceLen is the fence nonce's length in hex digits (64 random bits).
const nonceLen = 16

// newNonce is a fresh fence nonce.
func newNonce() string {
	var b [nonceLen / 2]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("herdr: no randomness: %v", err))
	}
	return hex.EncodeToString(b[:])
}

// fenceLine closes a typed brief (what "brief" or "broadcast").
func fenceLine(what, nonce string) string {
	return promptMark + " end of " + what + " " + nonce
}

// fenceHeader is the first line of a typed brief or broadcast from from
// (a validated entity name), fenced with nonce; prov is what the
// gateway verified of the sender (provenanceWords).
func fenceHeader(broadcast bool, from, prov, nonce string) string {
	if broadcast {
		return fmt.Sprintf("%s Broadcast from %s [%s]; %s's text follows, up to the line %q:", promptMark, from, prov, from, fenceLine("broadcast", nonce))
	}
	return fmt.Sprintf("%s Brief from %s [%s] (reply with bridge_send target %q); %s's text follows, up to the line %q:", promptMark, from, prov, from, from, fenceLine("brief", nonce))
}

// provenanceWords is the sender's provenance in herdbridge's words for a
// pane header: "sender name@host, role R, signature of host H verified"
// (or "this host's own entity", or "not verified"). Every part is
// reduced to safeWord: no quote, bracket or blank of a sender's making
// reaches the header.
func provenanceWords(p bridge.Provenance) string {
	parts := []string{"sender " + safeWord(cmpOr(p.From, "unknown"))}
	if p.Role != "" {
		parts = append(parts, "role "+safeWord(string(p.Role)))
	}
	switch p.Checked {
	case bridge.CheckedLocal:
		parts = append(parts, "an entity of this host")
	case bridge.CheckedSignature:
		host := p.From[strings.LastIndexByte(p.From, '@')+1:]
		parts = append(parts, "signature of host "+safeWord(host)+" verified")
	default:
		parts = append(parts, "not verified (this gateway checks no signatures)")
	}
	return strings.Join(parts, ", ")
}

// safeWord keeps letters, digits and ._@:- of s (at most 160 bytes), each
// other character becoming '?'.
func safeWord(s string) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= 160 {
			break
		}
		ok := r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._@:-", r))
		if !ok {
			r = '?'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// provenanceInHeader is a header's provenance bracket with its blanks
// removed (safeWord leaves no ']' in it).
var provenanceInHeader = regexp.MustCompile(`\[sender[^\]]*\]`)

// sameButProvenance is SameText with each text's first provenance
// bracket left out: what this gateway knows of a sender may have changed
// since the brief was typed (after a restart, a remote sender's presence
// has not come back yet), and the composer still holds our own text.
func sameButProvenance(draft, text string) bool {
	d, t := stripBlanks(draft), stripBlanks(text)
	cut := func(s string) string {
		if loc := provenanceInHeader.FindStringIndex(s); loc != nil {
			return s[:loc[0]] + s[loc[1]:]
		}
		return s
	}
	return draft != "" && provenanceInHeader.MatchString(d) && provenanceInHeader.MatchString(t) && cut(d) == cut(t)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// fenced is header, text and the closing fence, one per line.
func fenced(broadcast bool, from, prov, nonce, text string) string {
	what := "brief"
	if broadcast {
		what = "broadcast"
	}
	text = strings.TrimRight(text, "\n")
	if text != "" {
		text += "\n"
	}
	return fenceHeader(broadcast, from, prov, nonce) + "\n" + text + fenceLine(what, nonce)
}

// nonceInHeader finds the nonce in a header with its blanks removed: a
// composer may wrap the long header line anywhere, even inside the nonce.
var nonceInHeader = regexp.MustCompile(`^\[herdbridge\](?:Brief|Broadcast)from[^"]*(?:"[^"]*")?[^"]*"\[herdbridge\]endof(?:brief|broadcast)([0-9a-f]{16})":`)

// nonceOf is the fence nonce a typed brief's header names ("" if text
// does not start with one): own-draft recovery rebuilds the prompt it
// finds in a composer with it.
func nonceOf(text string) string {
	if m := nonceInHeader.FindStringSubmatch(stripBlanks(text)); m != nil {
		return m[1]
	}
	return ""
}

// quotePrefix goes in front of a sender's line that starts like ours. Not
// "> " nor "| ": those are composer prompt marks and box borders to
// ComposerDraft, which must still find our text in a composer.
const quotePrefix = "(quoted) "

// QuoteOwnLines puts "(quoted) " in front of every line of s that OwnLine
// reports as starting like herdbridge's own words, also when the sender
// already wrote "(quoted) " before it (so removing one prefix from each
// quoted line gives s back exactly); every other byte of s is kept.
func QuoteOwnLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		rest := l
		for strings.HasPrefix(rest, quotePrefix) {
			rest = rest[len(quotePrefix):]
		}
		if OwnLine(rest) {
			lines[i] = quotePrefix + l
		}
	}
	return strings.Join(lines, "\n")
}

// OwnLine reports whether line starts like a line herdbridge types: past
// leading blanks and invisible characters (format characters such as
// zero-width spaces, and combining marks with nothing to combine with),
// promptMark's "[herdbridge" in any case. Blank-looking fillers count as
// invisible too (blankFiller).
func OwnLine(line string) bool {
	l := strings.TrimLeftFunc(line, invisibleLead)
	mark := promptMark[:len(promptMark)-1]
	for _, m := range mark {
		r, size := utf8.DecodeRuneInString(l)
		if size == 0 || !sameLetter(r, m) {
			return false
		}
		l = l[size:]
	}
	return true
}

// sameLetter is r == m ignoring case (m is ASCII), including the Unicode
// letters that fold to an ASCII one (the Kelvin sign K folds to k).
func sameLetter(r, m rune) bool {
	if r == m {
		return true
	}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f == m {
			return true
		}
	}
	return false
}

func invisibleLead(r rune) bool {
	return unicode.IsSpace(r) || unicode.In(r, unicode.Cf, unicode.Mn, unicode.Me) || blankFiller(r)
}

// blankFiller: letters and symbols that render as blank space though
// Unicode does not class them as spaces (the Hangul fillers, the blank
// Braille pattern), so a line may start with them and still look like
// it starts with our mark.
func blankFiller(r rune) bool {
	switch r {
	case '\u115f', '\u1160', '\u3164', '\uffa0', '\u2800':
		return true
	}
	return false
}
