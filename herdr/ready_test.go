package herdr

import (
	"strings"
	"testing"
)

// FuzzComposerDraft: a pane's screen is whatever the agent and its user
// printed; reading the composer's draft from it never panics, never
// invents text longer than the screen, and a draft read is the same text
// as itself (own-draft recovery compares drafts with SameText).
func FuzzComposerDraft(f *testing.F) {
	f.Add("some output\n> fix the tests\n")
	f.Add("│ > a long brief that\n│   wraps onto a second line │\n╰──────╯\n")
	f.Add("❯ \n")
	f.Add(strings.Repeat("x\n", 100) + ">")
	f.Add("\xff\xfe> \xc3")
	f.Fuzz(func(t *testing.T, screen string) {
		d := ComposerDraft(screen)
		if len(d) > len(screen) {
			t.Fatalf("draft %q longer than the screen %q", d, screen)
		}
		if d != "" && !SameText(d, d) {
			t.Fatalf("draft %q is not the same text as itself", d)
		}
		if SameText("", d) {
			t.Fatalf("an empty draft matched %q", d)
		}
	})
}

func TestComposerDraft(t *testing.T) {
	for _, tc := range []struct{ screen, want string }{
		{"output\n> fix the tests\n", "fix the tests"},
		{"│ > a long brief that\n│   wraps onto a second line │\n╰──────╯\n", "a long brief that\nwraps onto a second line"},
		{"no prompt here\n", ""},
		{"> \n", ""},
	} {
		if got := ComposerDraft(tc.screen); got != tc.want {
			t.Errorf("ComposerDraft(%q) = %q, want %q", tc.screen, got, tc.want)
		}
	}
	if !SameText("a long brief that\nwraps", "a long brief\nthat wraps") || SameText("a", "b") {
		t.Error("SameText compares text without its line breaks and spaces")
	}
}
