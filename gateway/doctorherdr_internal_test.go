package gateway

import (
	"testing"

	"github.com/herdbridge/herdbridge/herdr"
)

// TestDoctorHerdrOptional: herdr not answering is a fail only when
// something on this host needs it (a socket named in the configuration,
// spawn profiles, entities in panes); otherwise a warning, since without
// herdr every worker pulls its briefs.
func TestDoctorHerdrOptional(t *testing.T) {
	cases := []struct {
		name  string
		file  FileConfig
		panes int
		want  string
	}{
		{"nothing needs it", FileConfig{}, 0, CheckWarn},
		{"socket configured", FileConfig{Herdr: HerdrConfig{Socket: "/run/herdr.sock"}}, 0, CheckFail},
		{"spawn profiles", FileConfig{Profiles: map[string]herdr.Profile{"rev": {Kind: "claude"}}}, 0, CheckFail},
		{"entities in panes", FileConfig{}, 2, CheckFail},
	}
	for _, c := range cases {
		d := &doctor{}
		d.herdrChecks(&HerdrReport{Socket: "/s", Error: "nothing answers", NeededBy: herdrNeededBy(c.file, c.panes)})
		if got := d.checks[0].Status; got != c.want {
			t.Errorf("%s: %s (%+v), want %s", c.name, got, d.checks[0], c.want)
		}
	}
}
