package gateway

import (
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// TestDoctorSkewThresholds: ok up to 30 s either way, warn past it, fail
// past the allowance or when the peer's heartbeats were refused for their
// timestamp.
func TestDoctorSkewThresholds(t *testing.T) {
	cases := []struct {
		skew    time.Duration
		refused bool
		want    string
	}{
		{0, false, CheckOK},
		{-29 * time.Second, false, CheckOK},
		{31 * time.Second, false, CheckWarn},
		{-90 * time.Second, false, CheckWarn},
		{121 * time.Second, false, CheckFail},
		{-5 * time.Minute, false, CheckFail},
		{-20 * time.Second, true, CheckFail},
	}
	for _, c := range cases {
		ms := c.skew.Milliseconds()
		d := &doctor{}
		d.skewCheck(bridge.PeerView{Host: "b", SkewMs: &ms, SkewRefused: c.refused}, 2*time.Minute)
		got := d.checks[0]
		if got.Status != c.want || got.Name != "clock b" || (got.Status != CheckOK) != (got.Fix != "") {
			t.Errorf("skew %v refused %v: %+v, want %s", c.skew, c.refused, got, c.want)
		}
	}
}
