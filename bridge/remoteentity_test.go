package bridge

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestRemoteEntityKeepsEveryField fails when Presence gains a field that
// compactEntity neither keeps nor counts as "more": the digest of a view
// would then differ from its host's, and the two would ask each other for
// snapshots forever.
func TestRemoteEntityKeepsEveryField(t *testing.T) {
	kept := map[string]bool{"GID": true, "Name": true, "Host": true, "Role": true, "PaneID": true, "Status": true, "Groups": true, "Forward": true}
	more := map[string]bool{"Profiles": true, "Key": true, "Started": true, "Trusts": true, "DeadLetterNotices": true,
		"GiveUps": true, "SealKey": true, "SealKeyID": true, "SealsBroadcasts": true}
	hashedOut := map[string]bool{"Epoch": true, "Ver": true, "Digest": true, "Gone": true}
	for f := range reflect.TypeFor[Presence]().Fields() {
		if !kept[f.Name] && !more[f.Name] && !hashedOut[f.Name] {
			t.Errorf("Presence.%s: neither kept by remoteEntity nor checked by carriesMore", f.Name)
		}
	}
}

// TestRemoteEntityRoundTrip: what presence keeps of an entry hashes as the
// entry did, a plain entity's and an odd one's (a gateway field on it).
func TestRemoteEntityRoundTrip(t *testing.T) {
	plain := Presence{GID: "g1", Name: "w", Host: "h", Role: RoleWorker, Groups: []string{"a", "b"}, PaneID: "p1", Status: "busy", Forward: true, Epoch: 3, Ver: 7}
	odd := plain
	odd.Key, odd.Started, odd.Trusts = "fp", 42, map[string][]string{"x": {"y"}}
	for _, p := range []Presence{plain, odd, {GID: "g2", Name: "n", Host: "h"}} {
		got := compactEntity(p).presence()
		if presenceHash([]Presence{got}, nil) != presenceHash([]Presence{p}, nil) {
			a, _ := json.Marshal(got)
			b, _ := json.Marshal(p)
			t.Errorf("kept %s of %s: hashes differ", a, b)
		}
	}
	if compactEntity(plain).odd != nil || compactEntity(odd).odd == nil {
		t.Error("odd is set for an entry with more than an entity's fields, and only then")
	}
}
