package herdrtest

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Key syntax as API.md §4.2 describes it (src/config/keybinds.rs
// parse_key_combo, normalize_api_key_alias), encoded for a terminal in the
// legacy keyboard mode. The fake never turns on the kitty protocol.

var namedKeys = map[string]string{
	"enter":     "\r",
	"return":    "\r",
	"esc":       "\x1b",
	"escape":    "\x1b",
	"tab":       "\t",
	"backspace": "\x7f",
	"bs":        "\x7f",
	"space":     " ",
	"up":        "\x1b[A",
	"down":      "\x1b[B",
	"right":     "\x1b[C",
	"left":      "\x1b[D",
	"f1":        "\x1bOP",
	"f2":        "\x1bOQ",
	"f3":        "\x1bOR",
	"f4":        "\x1bOS",
	"f5":        "\x1b[15~",
	"f6":        "\x1b[17~",
	"f7":        "\x1b[18~",
	"f8":        "\x1b[19~",
	"f9":        "\x1b[20~",
	"f10":       "\x1b[21~",
	"f11":       "\x1b[23~",
	"f12":       "\x1b[24~",
	// named punctuation
	"minus":        "-",
	"plus":         "+",
	"comma":        ",",
	"period":       ".",
	"slash":        "/",
	"backslash":    "\\",
	"quote":        "'",
	"double_quote": "\"",
	"semicolon":    ";",
	"colon":        ":",
	"percent":      "%",
	"ampersand":    "&",
	"backtick":     "`",
}

var modifierAlias = map[string]string{
	"ctrl": "ctrl", "control": "ctrl",
	"alt": "alt", "option": "alt", "meta": "alt",
	"shift": "shift",
	"cmd":   "super", "super": "super",
	"hyper": "hyper",
}

// encodeKey turns one API key name into the bytes herdr writes to the PTY.
func encodeKey(key string) ([]byte, error) {
	k := strings.TrimSpace(key)
	if k == "" {
		return nil, fmt.Errorf("invalid key: empty key")
	}
	if k == "+" {
		k = "plus"
	}
	// C-c / c-c → ctrl+c
	if len(k) == 3 && (k[0] == 'C' || k[0] == 'c') && k[1] == '-' {
		k = "ctrl+" + k[2:]
	}
	parts := strings.Split(k, "+")
	base := parts[len(parts)-1]
	if base == "" { // "ctrl++" style
		base = "plus"
	}
	mods := map[string]bool{}
	for _, m := range parts[:len(parts)-1] {
		lm := strings.ToLower(m)
		if lm == "prefix" {
			return nil, fmt.Errorf("invalid key: %q (prefix bindings are not keys)", key)
		}
		mod, ok := modifierAlias[lm]
		if !ok {
			return nil, fmt.Errorf("invalid key: %q (unknown modifier %q)", key, m)
		}
		mods[mod] = true
	}

	var out string
	lb := strings.ToLower(base)
	switch {
	case lb == "tab" && mods["shift"]:
		out = "\x1b[Z"
		delete(mods, "shift")
	case namedKeys[lb] != "":
		out = namedKeys[lb]
	case utf8.RuneCountInString(base) == 1:
		r, _ := utf8.DecodeRuneInString(base)
		if r < 0x20 || r == 0x7f {
			return nil, fmt.Errorf("invalid key: %q", key)
		}
		if mods["shift"] && r >= 'a' && r <= 'z' {
			r -= 'a' - 'A'
		}
		out = string(r)
	default:
		return nil, fmt.Errorf("invalid key: %q", key)
	}
	if mods["ctrl"] && len(out) == 1 {
		c := out[0]
		switch {
		case c >= 'a' && c <= 'z':
			out = string(c - 'a' + 1)
		case c >= 'A' && c <= 'Z':
			out = string(c - 'A' + 1)
		case c == ' ' || c == '@':
			out = "\x00"
		case c == '[':
			out = "\x1b"
		case c == '\\':
			out = "\x1c"
		case c == ']':
			out = "\x1d"
		}
	}
	if mods["alt"] {
		out = "\x1b" + out
	}
	return []byte(out), nil
}

func encodeKeys(keys []string) ([][]byte, error) {
	out := make([][]byte, 0, len(keys))
	for _, k := range keys {
		b, err := encodeKey(k)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}
