package keys_test

import (
	"crypto/hpke"
	"strconv"
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

// BenchmarkBroadcastSeal is what sealing adds to a broadcast read on n
// hosts: one AEAD over the body and one HPKE wrap of its key per host
// (bridge.SealBroadcast); BenchmarkBroadcastOpen is one host's open.
func BenchmarkBroadcastSeal(b *testing.B) {
	for _, n := range []int{2, 8, 64} {
		b.Run(strconv.Itoa(n)+"hosts", func(b *testing.B) {
			rs := broadcastRecipients(b, n)
			e := benchEnvelope()
			e.Kind, e.To = bridge.KindBroadcast, bridge.BroadcastAll
			body := e.Body
			b.ReportAllocs()
			for b.Loop() {
				e.Body, e.Seal, e.SealKey = body, "", ""
				if err := e.SealBroadcast(rs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkBroadcastOpen(b *testing.B) {
	k, _, err := keys.LoadOrCreateSealKey(b.TempDir(), "host-b")
	if err != nil {
		b.Fatal(err)
	}
	pub, _ := keys.ParseSealPublic(k.Public())
	rs := append(broadcastRecipients(b, 7), bridge.SealRecipient{Host: "host-b", KeyID: k.ID(), Pub: pub})
	e := benchEnvelope()
	e.Kind, e.To = bridge.KindBroadcast, bridge.BroadcastAll
	if err := e.SealBroadcast(rs); err != nil {
		b.Fatal(err)
	}
	sealed := e.Clone()
	priv := func(id string) (hpke.PrivateKey, bool) { return k.Private(), id == k.ID() }
	b.ReportAllocs()
	for b.Loop() {
		e.Body, e.Seal, e.SealKey = sealed.Body, sealed.Seal, sealed.SealKey
		if err := e.OpenBroadcast("host-b", priv); err != nil {
			b.Fatal(err)
		}
	}
}

func broadcastRecipients(b *testing.B, n int) []bridge.SealRecipient {
	var rs []bridge.SealRecipient
	for i := range n {
		k, _, err := keys.LoadOrCreateSealKey(b.TempDir(), "h")
		if err != nil {
			b.Fatal(err)
		}
		pub, _ := keys.ParseSealPublic(k.Public())
		rs = append(rs, bridge.SealRecipient{Host: "h" + strconv.Itoa(i), KeyID: k.ID(), Pub: pub})
	}
	return rs
}
