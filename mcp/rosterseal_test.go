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
	hosts := []bridge.HostView{{Host: "here", Local: true}, {Host: "b", Seal: bridge.SealStateSealed}, {Host: "c", Seal: bridge.SealStateNoKey}}
	lines := []string{hostLine(&hosts[0]), hostLine(&hosts[1]), hostLine(&hosts[2])}
	if strings.Contains(lines[0], "seal") || !strings.Contains(lines[1], "seal: sealed") || !strings.Contains(lines[2], "seal: no key") {
		t.Fatalf("roster listing's host lines:\n%s", strings.Join(lines, "\n"))
	}
	counts, _ := hostCounts(hosts, map[string]int{})
	sum := summaryText(rosterResult{Summary: &rosterSummary{Hosts: counts}})
	if !strings.Contains(sum, "host b  entities=0  profiles: ") || !strings.Contains(sum, "seal: sealed") || !strings.Contains(sum, "seal: no key") {
		t.Fatalf("roster summary's text:\n%s", sum)
	}
}
