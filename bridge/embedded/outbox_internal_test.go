package embedded

import (
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// FuzzDecodeSpool: a damaged outbox record is an error, never a panic, and
// what decodes is a valid envelope that encodes back to the same message.
func FuzzDecodeSpool(f *testing.F) {
	ts := time.UnixMilli(1700000000000)
	e := &bridge.Envelope{V: bridge.Version, Kind: bridge.KindReply, MsgID: "5f0c6c1e-8a8e-4c53-9a43-0d1b8f1f0c11",
		From: "0b8e4a4e-3a8f-4c1a-9f0e-2d7e1e2c3b4a", To: "7d9f1c2e-5b6a-4e3d-8c1f-0a2b3c4d5e6f", Host: "h", TS: ts, ExpiresAt: ts.Add(time.Minute), Body: []byte("hi"), Sig: []byte{1, 2}}
	good, err := encodeSpool("7d9f1c2e-5b6a-4e3d-8c1f-0a2b3c4d5e6f", e, true, 1)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"h":{},"b":"","k":"x"}`))
	f.Add([]byte(`{"k":""}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"h":{"v":1e300},"k":"k"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		key, mandatory, env, err := decodeSpool(raw)
		if err != nil {
			return
		}
		if env == nil || key == "" {
			t.Fatalf("decoded without error but env %v key %q", env, key)
		}
		if err := env.Validate(); err != nil {
			t.Fatalf("decoded an invalid envelope: %v", err)
		}
		again, err := encodeSpool(key, env, mandatory, 1)
		if err != nil {
			t.Fatal(err)
		}
		k2, m2, env2, err := decodeSpool(again)
		if err != nil || k2 != key || m2 != mandatory || env2.MsgID != env.MsgID || string(env2.Body) != string(env.Body) {
			t.Fatalf("round trip changed it: %q %v %+v %v", k2, m2, env2, err)
		}
	})
}
