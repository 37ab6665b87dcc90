package bridge

import (
	"slices"
	"unicode"
)

// A heartbeat's fields besides its gid, name and host (checked against
// its envelope) come from the signing host alone. A gateway fills them
// from validated local sources, but a host of the trust circle that is
// compromised or buggy could write any text there, and they reach every
// other host's roster: the model's bridge_roster, `herdbridge roster` on
// an operator's terminal, the page. cleanPresence keeps only values of
// the form a gateway writes, so no field can carry a line break, a
// terminal escape or a forged roster line; what it drops reads as
// unknown (a role "" counts as a worker for the role policy).

// maxPresenceField bounds a pane id, status, key or profile name.
const maxPresenceField = 128

// cleanPresence is p with every field not of a gateway's form dropped.
func cleanPresence(p Presence) Presence {
	if !p.Role.Valid() {
		p.Role = ""
	}
	p.Groups = slices.DeleteFunc(slices.Clone(p.Groups), func(g string) bool { return !ValidGroup(g) })
	for _, f := range []*string{&p.PaneID, &p.Status, &p.Key} {
		if !presenceToken(*f) {
			*f = ""
		}
	}
	p.Profiles = slices.DeleteFunc(slices.Clone(p.Profiles), func(n string) bool { return !presenceLine(n) || n == "" })
	return p
}

// presenceToken: a short printable word (pane ids, statuses, key
// fingerprints have no blanks).
func presenceToken(s string) bool {
	for _, r := range s {
		if unicode.IsSpace(r) {
			return false
		}
	}
	return presenceLine(s)
}

// presenceLine: short printable text on one line (a profile name, which
// the host's config may spell with blanks).
func presenceLine(s string) bool {
	if len(s) > maxPresenceField {
		return false
	}
	for _, r := range s {
		if !unicode.IsGraphic(r) || r == '\u2028' || r == '\u2029' || r == unicode.ReplacementChar {
			return false
		}
	}
	return true
}
