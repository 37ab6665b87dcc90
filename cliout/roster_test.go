package cliout

import (
	"bytes"
	"strings"
	"testing"

	"github.com/herdbridge/herdbridge/bridge"
)

// TestRosterSeal: `herdbridge roster` says, per other host, whether what
// goes to it is sealed; this host's line says nothing of it.
func TestRosterSeal(t *testing.T) {
	var b bytes.Buffer
	v := &bridge.RosterView{Hosts: []bridge.HostView{{Host: "here", Local: true}, {Host: "b", Seal: bridge.SealStateSealed}, {Host: "c", Seal: bridge.SealStateNoKey}}}
	if err := Roster(&b, v); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	if strings.Contains(lines[0], "seal") || !strings.Contains(lines[1], "seal sealed") || !strings.Contains(lines[2], "seal no key") {
		t.Fatalf("roster:\n%s", b.String())
	}
}
