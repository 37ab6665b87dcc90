package buildinfo

import (
	"regexp"
	"testing"
)

var shortRe = regexp.MustCompile(`^(devel|v\d+\.\d+\.\d+\S*)(\+[0-9a-f]{12}(\.dirty)?)?$`)

// TestShort: the short version names the revision as build metadata
// (.dirty for uncommitted changes) unless a pseudo-version names it already.
func TestShort(t *testing.T) {
	for _, c := range []struct {
		b    Info
		want string
	}{
		{Info{module: "(devel)"}, "devel"},
		{Info{module: "(devel)", revision: "d05d15a1c2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7", modified: true}, "devel+d05d15a1c2e3.dirty"},
		{Info{module: "v1.2.3", revision: "d05d15a1c2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7"}, "v1.2.3+d05d15a1c2e3"},
		{Info{module: "v0.0.0-20261201052523-d05d15a1c2e3", revision: "d05d15a1c2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7"}, "v0.0.0-20261201052523-d05d15a1c2e3"},
	} {
		if got := c.b.Short(); got != c.want || !shortRe.MatchString(got) {
			t.Errorf("%+v: %q, want %q", c.b, got, c.want)
		}
	}
}
