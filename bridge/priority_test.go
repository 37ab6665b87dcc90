package bridge_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/herdbridge/herdbridge/bridge"
)

// TestPriorityHeader: priority "next" rides a SEND as a signed header: an
// envelope without it signs exactly as before (the golden vector holds),
// one with it signs differently, so stripping or adding the header breaks
// the signature; it survives the wire; on any other kind, or with any
// other value, the envelope is malformed.
func TestPriorityHeader(t *testing.T) {
	plain := validEnvelope(bridge.KindSend)
	next := validEnvelope(bridge.KindSend)
	next.Priority = bridge.PriorityNext
	if err := next.Validate(); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(plain.SigningInput(), next.SigningInput()) {
		t.Fatal("priority is not in the signing input: stripping it would keep the signature valid")
	}
	if !bytes.HasPrefix(next.SigningInput(), plain.SigningInput()[:len(plain.SigningInput())-8-len(plain.Body)]) {
		t.Fatal("the fields before priority moved")
	}
	got, err := bridge.FromHeaders(next.Headers(), next.Body)
	if err != nil || got.Priority != bridge.PriorityNext || !bytes.Equal(got.SigningInput(), next.SigningInput()) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	if _, ok := plain.Headers()[bridge.HdrPriority]; ok {
		t.Fatal("an envelope without priority carries the header")
	}
	bad := []*bridge.Envelope{validEnvelope(bridge.KindReply), validEnvelope(bridge.KindBroadcast), validEnvelope(bridge.KindSend)}
	bad[0].Priority, bad[1].Priority, bad[2].Priority = bridge.PriorityNext, bridge.PriorityNext, "urgent"
	for _, e := range bad {
		if _, err := bridge.FromHeaders(e.Headers(), e.Body); !errors.Is(err, bridge.ErrMalformed) {
			t.Errorf("%s with priority %q: %v", e.Kind, e.Priority, err)
		}
	}
}

// TestControlKinds: STOP and INTERRUPT are addressed to a control queue,
// not to a gid, and their bodies must name a worker (and a STOP its stop
// id).
func TestControlKinds(t *testing.T) {
	for _, k := range []bridge.Kind{bridge.KindStop, bridge.KindInterrupt} {
		e := validEnvelope(bridge.KindSpawn)
		e.Kind, e.SpawnID, e.To = k, "", "control.host-b"
		e.Body = []byte(`{"target":"` + uTo + `","stopId":"` + uCorr + `"}`)
		if _, err := bridge.FromHeaders(e.Headers(), e.Body); err != nil {
			t.Errorf("%s: %v", k, err)
		}
		if !bridge.ControlBodyOK(e) {
			t.Errorf("%s body refused", k)
		}
		e.Body = []byte(`{"target":"w"}`)
		if bridge.ControlBodyOK(e) {
			t.Errorf("%s naming no gid accepted", k)
		}
	}
}

// FuzzControlBody: whatever a control message's body holds, checking it
// never panics, and a body it accepts names a worker by gid.
func FuzzControlBody(f *testing.F) {
	f.Add("STOP", `{"target":"`+uTo+`","stopId":"`+uCorr+`","reason":"r","closePane":true}`)
	f.Add("INTERRUPT", `{"target":"`+uTo+`","next":true}`)
	f.Add("SPAWN", `{"profile":"reviewer","name":"x"}`)
	f.Add("STOP", `{"target":1}`)
	f.Fuzz(func(t *testing.T, kind, body string) {
		e := validEnvelope(bridge.KindSpawn)
		e.Kind, e.Body = bridge.Kind(kind), []byte(body)
		if !bridge.ControlBodyOK(e) || e.Kind != bridge.KindStop && e.Kind != bridge.KindInterrupt {
			return
		}
		var b struct{ Target string }
		if json.Unmarshal(e.Body, &b) != nil || len(b.Target) != 36 {
			t.Fatalf("accepted %s body %q", kind, body)
		}
	})
}
