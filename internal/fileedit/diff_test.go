package fileedit

import (
	"strings"
	"testing"
)

// TestUnifiedDiff: the diff --print shows applies: hunks with context, a
// change in the middle of a long file shown as one hunk near it.
func TestUnifiedDiff(t *testing.T) {
	var a, b []string
	for i := range 20 {
		a = append(a, "line "+string(rune('a'+i))+"\n")
	}
	b = append(b, a[:10]...)
	b = append(b, "new\n")
	b = append(b, a[11:]...)
	got := UnifiedDiff(strings.Join(a, ""), strings.Join(b, ""), 3)
	want := "@@ -8,7 +8,7 @@\n line h\n line i\n line j\n-line k\n+new\n line l\n line m\n line n\n"
	if got != want {
		t.Errorf("diff:\n%s\nwant:\n%s", got, want)
	}
	if got := UnifiedDiff("", "x\ny\n", 3); got != "@@ -0,0 +1,2 @@\n+x\n+y\n" {
		t.Errorf("diff from nothing: %q", got)
	}
	if got := UnifiedDiff("same\n", "same\n", 3); got != "" {
		t.Errorf("no change gave %q", got)
	}
}
