package keys_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/keys"
)

func benchEnvelope() *bridge.Envelope {
	now := time.Now()
	return &bridge.Envelope{V: bridge.Version, Kind: bridge.KindReply, MsgID: uuid.NewString(), TraceID: uuid.NewString(),
		From: uuid.NewString(), To: uuid.NewString(), Host: "host-a", TS: now, ExpiresAt: now.Add(24 * time.Hour),
		Body: []byte("done: built the thing, 3 files changed, tests pass")}
}

// BenchmarkEnvelopeSign is what a gateway adds per published message:
// the signing input and an Ed25519 signature.
func BenchmarkEnvelopeSign(b *testing.B) {
	k, _, err := keys.LoadOrCreate(b.TempDir(), "host-a")
	if err != nil {
		b.Fatal(err)
	}
	e := benchEnvelope()
	b.ReportAllocs()
	for b.Loop() {
		e.Sig = k.Sign(e.SigningInput())
	}
}

// BenchmarkEnvelopeVerify is what a gateway adds per received message: the
// signing input and a verification through the trust ring.
func BenchmarkEnvelopeVerify(b *testing.B) {
	a := b.TempDir()
	k, _, err := keys.LoadOrCreate(a, "host-a")
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, keys.TrustFile), []byte("host-a "+k.AuthorizedLine()+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	ring, err := keys.NewRing(dir, "host-b", nil)
	if err != nil {
		b.Fatal(err)
	}
	e := benchEnvelope()
	e.Sig = k.Sign(e.SigningInput())
	b.ReportAllocs()
	for b.Loop() {
		if err := ring.Verify(e.Host, e.SigningInput(), e.Sig); err != nil {
			b.Fatal(err)
		}
	}
}
