package herdr

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSanitize(t *testing.T) {
	cases := map[string]string{
		"plain":                              "plain",
		"two\nlines\tand tab":                "two\nlines\tand tab",
		"end paste\x1b[201~ then run":        "end paste[201~ then run",
		"bell\a backspace\b nul\x00 del\x7f": "bell backspace nul del",
		"crlf\r\nlone cr\rend":               "crlf\nlone cr\nend",
		"c1 \u009b31m csi":                   "c1 31m csi",
		"ls\u2028ps\u2029end":                "ls\nps\nend",
		"bad \xff utf8":                      "bad \uFFFD utf8",
		"ünïcödé ✓ 日本":                       "ünïcödé ✓ 日本",
	}
	for in, want := range cases {
		if got := Sanitize(in); got != want {
			t.Errorf("Sanitize(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzSanitize(f *testing.F) {
	for _, s := range []string{"", "a\x1b[201~b", "\r\n\r", "\u009b", "\xff\xfe", "日本\t\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := Sanitize(s)
		if !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8 out of %q", s)
		}
		for _, r := range out {
			if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
				t.Fatalf("control %U left in %q", r, out)
			}
		}
		if strings.Contains(out, "\x1b") {
			t.Fatal("ESC left")
		}
		if Sanitize(out) != out {
			t.Fatalf("not idempotent on %q", s)
		}
	})
}
