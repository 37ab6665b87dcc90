package keys_test

import (
	"crypto/hpke"
	"strings"
	"testing"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/keys"
)

// BenchmarkEnvelopeSeal is what sealing adds per published message:
// HPKE (ML-KEM-768+X25519, HKDF-SHA256, ChaCha20-Poly1305) over the body
// and its base64. Beside BenchmarkEnvelopeSign.
func BenchmarkEnvelopeSeal(b *testing.B) {
	k, _, err := keys.LoadOrCreateSealKey(b.TempDir(), "host-b")
	if err != nil {
		b.Fatal(err)
	}
	pub, err := keys.ParseSealPublic(k.Public())
	if err != nil {
		b.Fatal(err)
	}
	e := benchEnvelope()
	body := e.Body
	b.ReportAllocs()
	for b.Loop() {
		e.Body, e.Seal, e.SealKey = body, "", ""
		if err := e.SealBody(pub, k.ID()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEnvelopeOpen is what opening adds per received message.
func BenchmarkEnvelopeOpen(b *testing.B) {
	k, _, err := keys.LoadOrCreateSealKey(b.TempDir(), "host-b")
	if err != nil {
		b.Fatal(err)
	}
	pub, _ := keys.ParseSealPublic(k.Public())
	e := benchEnvelope()
	if err := e.SealBody(pub, k.ID()); err != nil {
		b.Fatal(err)
	}
	sealed := e.Clone()
	b.ReportAllocs()
	for b.Loop() {
		e.Body, e.Seal, e.SealKey = sealed.Body, sealed.Seal, sealed.SealKey
		if err := e.OpenBody(k.Private()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAEAD compares the two AEADs the issue allows under the same KEM
// and KDF, per 4 KiB body (the choice of ChaCha20-Poly1305, envelope_seal.go).
func BenchmarkAEAD(b *testing.B) {
	k, _, err := keys.LoadOrCreateSealKey(b.TempDir(), "host-b")
	if err != nil {
		b.Fatal(err)
	}
	pub, _ := keys.ParseSealPublic(k.Public())
	body := []byte(strings.Repeat("x", 4096))
	for _, a := range []struct {
		name string
		aead hpke.AEAD
	}{{"chacha20poly1305", hpke.ChaCha20Poly1305()}, {"aes256gcm", hpke.AES256GCM()}} {
		b.Run(a.name, func(b *testing.B) {
			for b.Loop() {
				ct, err := hpke.Seal(pub, hpke.HKDFSHA256(), a.aead, []byte("info"), body)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := hpke.Open(k.Private(), hpke.HKDFSHA256(), a.aead, []byte("info"), ct); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

var _ = bridge.SealScheme
