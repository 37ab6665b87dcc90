package gateway

import (
	"strings"
	"testing"

	"github.com/herdbridge/herdbridge/bridge/broker"
)

// TestDoctorWarnsOfTwoClusters: a gateway whose transport reconnected to
// a node of another cluster shows it in doctor as a warning with the fix,
// not as an ok "broker node". Fails before brokerNode: the check was ok
// whatever the link said.
func TestDoctorWarnsOfTwoClusters(t *testing.T) {
	for _, tc := range []struct {
		mismatch, want string
	}{{"", CheckOK}, {`node b:5672 is in cluster "b", not "a"`, CheckWarn}} {
		d := &doctor{}
		d.brokerNode(broker.Link{Connected: true, Node: "b:5672", ClusterName: "b", Nodes: []string{"a:5672", "b:5672"}, ClusterMismatch: tc.mismatch})
		c := d.checks[0]
		if c.Status != tc.want || !strings.Contains(c.Detail, tc.mismatch) || (tc.mismatch != "" && !strings.Contains(c.Fix, "one cluster")) {
			t.Errorf("mismatch %q: %+v", tc.mismatch, c)
		}
	}
}
