package mcp

import (
	"strings"
	"testing"

	"github.com/herdbridge/herdbridge/bridge"
)

// TestRosterTextSeal: bridge_roster's text says, per other host, whether
// what goes to it is sealed (the structured hosts[].seal); this host's
// own line, with no seal state, says nothing of it.
func TestRosterTextSeal(t *testing.T) {
	v := bridge.RosterView{Hosts: []bridge.HostView{{Host: "here", Local: true}, {Host: "b", Seal: bridge.SealStateSealed}, {Host: "c", Seal: bridge.SealStateNoKey}}}
	lines := strings.Split(rosterText(v), "\n")
	if strings.Contains(lines[0], "seal") || !strings.Contains(lines[1], "seal: sealed") || !strings.Contains(lines[2], "seal: no key") {
		t.Fatalf("roster text:\n%s", strings.Join(lines, "\n"))
	}
}
