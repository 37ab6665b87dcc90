package bridge_test

import (
	"bytes"
	"crypto/hpke"
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
)

func sealPair(t testing.TB) (hpke.PrivateKey, hpke.PublicKey) {
	priv, err := hpke.MLKEM768X25519().GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return priv, priv.PublicKey()
}

func sealEnv() *bridge.Envelope {
	now := time.UnixMilli(time.Now().UnixMilli())
	return &bridge.Envelope{V: bridge.Version, Kind: bridge.KindSend, MsgID: uuid.NewString(), From: uuid.NewString(), To: uuid.NewString(),
		Host: "h1", TS: now, ExpiresAt: now.Add(time.Hour), Body: []byte("secret-body-7f3a")}
}

// TestSealRoundTrip: a sealed envelope survives the wire headers, its body
// holds no plaintext, it opens to the original, and the seal headers are
// signed (SigningInput differs from the clear form's).
func TestSealRoundTrip(t *testing.T) {
	priv, pub := sealPair(t)
	e := sealEnv()
	clearIn := e.SigningInput()
	if err := e.SealBody(pub, "hpke:k1"); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(e.Body, []byte("secret-body")) || bytes.Equal(clearIn, e.SigningInput()) {
		t.Fatal("sealed body shows the plaintext, or the seal is not signed")
	}
	w, err := bridge.FromHeaders(e.Headers(), e.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(w.SigningInput(), e.SigningInput()) {
		t.Fatal("signing input changed on the wire")
	}
	if err := w.OpenBody(priv); err != nil {
		t.Fatal(err)
	}
	if string(w.Body) != "secret-body-7f3a" || w.Sealed() {
		t.Fatalf("opened %q sealed=%v", w.Body, w.Sealed())
	}
}

// TestSealBindsEnvelope: the body moved to another envelope (any routing
// fact changed), a flipped ciphertext byte, or the wrong key: none opens.
func TestSealBindsEnvelope(t *testing.T) {
	priv, pub := sealPair(t)
	other, _ := sealPair(t)
	base := sealEnv()
	if err := base.SealBody(pub, "hpke:k1"); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(e *bridge.Envelope){
		"msgId":   func(e *bridge.Envelope) { e.MsgID = uuid.NewString() },
		"from":    func(e *bridge.Envelope) { e.From = uuid.NewString() },
		"to":      func(e *bridge.Envelope) { e.To = uuid.NewString() },
		"kind":    func(e *bridge.Envelope) { e.Kind = bridge.KindReply },
		"ts":      func(e *bridge.Envelope) { e.TS = e.TS.Add(time.Millisecond) },
		"host":    func(e *bridge.Envelope) { e.Host = "h2" },
		"sealKey": func(e *bridge.Envelope) { e.SealKey = "hpke:k2" },
	}
	for name, mut := range cases {
		e := base.Clone()
		mut(e)
		if err := e.OpenBody(priv); !errors.Is(err, bridge.ErrUnseal) {
			t.Errorf("%s changed: %v", name, err)
		}
	}
	for i := range base.Body {
		e := base.Clone()
		e.Body[i] ^= 0x01
		if err := e.OpenBody(priv); err == nil {
			t.Fatalf("byte %d flipped: opened", i)
		}
	}
	if err := base.Clone().OpenBody(other); !errors.Is(err, bridge.ErrUnseal) {
		t.Fatalf("wrong key: %v", err)
	}
}

// TestSealHeadersValidated: an unknown scheme, a bad key id, a seal on a
// kind never sealed, are malformed.
func TestSealHeadersValidated(t *testing.T) {
	for name, mut := range map[string]func(h map[string]any){
		"scheme":  func(h map[string]any) { h[bridge.HdrSeal] = "hpke/other" },
		"no key":  func(h map[string]any) { delete(h, bridge.HdrSealKey) },
		"bad key": func(h map[string]any) { h[bridge.HdrSealKey] = "a b" },
		"broadcast": func(h map[string]any) {
			h[bridge.HdrKind] = string(bridge.KindBroadcast)
			h[bridge.HdrTo] = bridge.BroadcastAll
		},
	} {
		_, pub := sealPair(t)
		e := sealEnv()
		if err := e.SealBody(pub, "hpke:k1"); err != nil {
			t.Fatal(err)
		}
		h := e.Headers()
		mut(h)
		if _, err := bridge.FromHeaders(h, e.Body); !errors.Is(err, bridge.ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzSealedEnvelope: any headers and body, parsed and opened, never
// panic; what opens is the plaintext sealed, and only under its envelope.
func FuzzSealedEnvelope(f *testing.F) {
	priv, pub := sealPair(f)
	e := sealEnv()
	if err := e.SealBody(pub, "hpke:k1"); err != nil {
		f.Fatal(err)
	}
	f.Add(e.MsgID, e.SealKey, e.Seal, e.Body)
	f.Add(e.MsgID, "hpke:k1", bridge.SealScheme, []byte("!!!"))
	f.Add(e.MsgID, "", "", []byte("clear"))
	f.Fuzz(func(t *testing.T, msgID, keyID, scheme string, body []byte) {
		h := e.Headers()
		h[bridge.HdrMsgID], h[bridge.HdrSealKey], h[bridge.HdrSeal] = msgID, keyID, scheme
		w, err := bridge.FromHeaders(h, body)
		if err != nil {
			return
		}
		if err := w.OpenBody(priv); err != nil {
			return
		}
		if w.Sealed() {
			t.Fatal("opened but still sealed")
		}
		if scheme != "" && string(w.Body) != "secret-body-7f3a" {
			t.Fatalf("opened to %q", w.Body)
		}
	})
}

func bcastEnv() *bridge.Envelope {
	e := sealEnv()
	e.Kind, e.To = bridge.KindBroadcast, bridge.BroadcastAll
	return e
}

type bcastHost struct {
	host, id string
	priv     hpke.PrivateKey
	pub      hpke.PublicKey
}

func bcastHosts(t testing.TB, n int) []bcastHost {
	var out []bcastHost
	for i := range n {
		priv, pub := sealPair(t)
		out = append(out, bcastHost{host: "h" + string(rune('a'+i)), id: "hpke:b" + string(rune('a'+i)), priv: priv, pub: pub})
	}
	return out
}

func recipients(hs []bcastHost) []bridge.SealRecipient {
	var rs []bridge.SealRecipient
	for _, h := range hs {
		rs = append(rs, bridge.SealRecipient{Host: h.host, KeyID: h.id, Pub: h.pub})
	}
	return rs
}

func (h bcastHost) keys(id string) (hpke.PrivateKey, bool) {
	if id == h.id {
		return h.priv, true
	}
	return nil, false
}

// TestSealBroadcastRoundTrip: a broadcast sealed to three hosts survives
// the wire headers, shows no plaintext, is signed with its seal headers,
// and each of the three opens it with its own key; a host not among them,
// or one holding another key, does not.
func TestSealBroadcastRoundTrip(t *testing.T) {
	hs := bcastHosts(t, 3)
	e := bcastEnv()
	clearIn := e.SigningInput()
	if err := e.SealBroadcast(recipients(hs)); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(e.Body, []byte("secret-body")) || bytes.Equal(clearIn, e.SigningInput()) || e.Seal != bridge.SealMultiScheme {
		t.Fatal("sealed broadcast shows the plaintext, or the seal is not signed")
	}
	for _, h := range hs {
		w, err := bridge.FromHeaders(e.Headers(), e.Body)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.OpenBroadcast(h.host, h.keys); err != nil {
			t.Fatalf("%s: %v", h.host, err)
		}
		if string(w.Body) != "secret-body-7f3a" || w.Sealed() {
			t.Fatalf("%s opened %q sealed=%v", h.host, w.Body, w.Sealed())
		}
	}
	other := bcastHosts(t, 4)[3]
	w, _ := bridge.FromHeaders(e.Headers(), e.Body)
	if err := w.OpenBroadcast(other.host, other.keys); !errors.Is(err, bridge.ErrNotARecipient) {
		t.Fatalf("a host not sealed to: %v", err)
	}
	w, _ = bridge.FromHeaders(e.Headers(), e.Body)
	if err := w.OpenBroadcast(hs[0].host, other.keys); !errors.Is(err, bridge.ErrUnseal) {
		t.Fatalf("a recipient without its key: %v", err)
	}
}

// TestSealBroadcastBinds: the sealed body moved to another envelope (a
// routing fact changed), or any byte of it flipped, does not open; the
// multi-host scheme on a kind other than a broadcast, or with another
// sealKey, is malformed.
func TestSealBroadcastBinds(t *testing.T) {
	hs := bcastHosts(t, 2)
	base := bcastEnv()
	if err := base.SealBroadcast(recipients(hs)); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*bridge.Envelope){
		"msgId": func(e *bridge.Envelope) { e.MsgID = uuid.NewString() },
		"from":  func(e *bridge.Envelope) { e.From = uuid.NewString() },
		"to":    func(e *bridge.Envelope) { e.To = bridge.BroadcastKey("ops") },
		"host":  func(e *bridge.Envelope) { e.Host = "h9" },
		"ts":    func(e *bridge.Envelope) { e.TS = e.TS.Add(time.Millisecond) },
	} {
		e := base.Clone()
		mod(e)
		if err := e.OpenBroadcast(hs[1].host, hs[1].keys); !errors.Is(err, bridge.ErrUnseal) {
			t.Errorf("%s changed: %v", name, err)
		}
	}
	// a flip in the first host's entry is the signature's to catch (it
	// covers the body); one in the second host's entry or the ciphertext
	// does not open there
	raw, _ := base64.StdEncoding.DecodeString(string(base.Body))
	at := 2 + 1 + len(hs[0].host) + 1 + len(hs[0].id)
	second := at + 2 + int(raw[at])<<8 + int(raw[at+1])
	for i := 0; i < len(raw); i += 31 {
		flip := append([]byte(nil), raw...)
		flip[i] ^= 1
		e := base.Clone()
		e.Body = []byte(base64.StdEncoding.EncodeToString(flip))
		err := e.OpenBroadcast(hs[1].host, hs[1].keys)
		if err == nil && (i >= second || string(e.Body) != "secret-body-7f3a") {
			t.Fatalf("byte %d flipped (second entry at %d): opened to %q", i, second, e.Body)
		}
	}
	h := base.Headers()
	h[bridge.HdrKind], h[bridge.HdrTo] = string(bridge.KindSend), uuid.NewString()
	if _, err := bridge.FromHeaders(h, base.Body); !errors.Is(err, bridge.ErrMalformed) {
		t.Fatalf("multi-host seal on a SEND: %v", err)
	}
	h = base.Headers()
	h[bridge.HdrSealKey] = "hpke:x"
	if _, err := bridge.FromHeaders(h, base.Body); !errors.Is(err, bridge.ErrMalformed) {
		t.Fatalf("multi-host seal with sealKey hpke:x: %v", err)
	}
	if err := bcastEnv().SealBroadcast(recipients(bcastHosts(t, 1))[:0]); err == nil {
		t.Fatal("sealed to no host")
	}
}

// FuzzOpenBroadcast: any body under a broadcast's multi-host seal headers
// never panics, and what opens is the plaintext sealed.
func FuzzOpenBroadcast(f *testing.F) {
	hs := bcastHosts(f, 2)
	e := bcastEnv()
	if err := e.SealBroadcast(recipients(hs)); err != nil {
		f.Fatal(err)
	}
	f.Add(e.Body)
	f.Add([]byte("AAE="))
	f.Add([]byte("!!!"))
	f.Fuzz(func(t *testing.T, body []byte) {
		w, err := bridge.FromHeaders(e.Headers(), body)
		if err != nil {
			return
		}
		if err := w.OpenBroadcast(hs[1].host, hs[1].keys); err != nil {
			return
		}
		if w.Sealed() || string(w.Body) != "secret-body-7f3a" {
			t.Fatalf("opened to %q", w.Body)
		}
	})
}
