package bridge_test

import (
	"bytes"
	"crypto/hpke"
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
