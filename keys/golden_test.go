package keys_test

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/keys"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/signature.json")

const signaturePath = "../testdata/signature.json"

// signatureVector is testdata/signature.json: a host key from a fixed seed,
// an envelope, the bytes signed and the Ed25519 signature, for a second
// implementation to check its signer and verifier against. Ed25519 is
// deterministic, so the signature is fixed too.
type signatureVector struct {
	Comment          string            `json:"comment"`
	SeedHex          string            `json:"seedHex"`
	PublicKeyHex     string            `json:"publicKeyHex"`
	PublicKeyOpenSSH string            `json:"publicKeyOpenSSH"`
	Fingerprint      string            `json:"fingerprint"`
	TrustFileLine    string            `json:"trustFileLine"`
	Headers          map[string]string `json:"headers"`
	BodyHex          string            `json:"bodyHex"`
	SigningInputHex  string            `json:"signingInputHex"`
	SignatureHex     string            `json:"signatureHex"`
	Tampered         []tamperCase      `json:"mustNotVerify"`
}

type tamperCase struct {
	What            string `json:"what"`
	SigningInputHex string `json:"signingInputHex"`
}

func goldenSignatureEnvelope() *bridge.Envelope {
	ts := time.Date(2026, 11, 29, 12, 0, 0, 250_000_000, time.UTC)
	return &bridge.Envelope{V: bridge.Version, Kind: bridge.KindReply, MsgID: "7f0c2a8e-3b1d-4c5e-9a6f-0123456789ab",
		TraceID: "1e2d3c4b-5a69-4788-8796-a5b4c3d2e1f0", From: "a0a0a0a0-b1b1-4c2c-8d3d-e4e4e4e4e4e4",
		To: "0f1e2d3c-4b5a-4697-8877-665544332211", Host: "host-a.example", TS: ts, ExpiresAt: ts.Add(24 * time.Hour),
		Body: []byte("done: 3 files changed, tests pass ✓")}
}

func makeSignatureVector() signatureVector {
	seed := sha256.Sum256([]byte("herdbridge golden host key v1"))
	priv := ed25519.NewKeyFromSeed(seed[:])
	pub := priv.Public().(ed25519.PublicKey)
	e := goldenSignatureEnvelope()
	in := e.SigningInput()
	v := signatureVector{
		Comment: "Golden vector of an envelope signature (SPEC §3, §8): Ed25519 (RFC 8032) by the host key below over signingInputHex, " +
			"which is bridge.Envelope.SigningInput of the headers and body here (its encoding: testdata/signing_input.json). " +
			"The signature travels in the AMQP header \"sig\" as a byte array. A verifier must accept signatureHex over signingInputHex " +
			"under publicKeyHex and reject it over each mustNotVerify input.",
		SeedHex: hex.EncodeToString(seed[:]), PublicKeyHex: hex.EncodeToString(pub),
		PublicKeyOpenSSH: keys.FormatPublicKey(pub), Fingerprint: keys.Fingerprint(pub),
		TrustFileLine: e.Host + " " + keys.FormatPublicKey(pub),
		Headers:       map[string]string{},
		BodyHex:       hex.EncodeToString(e.Body), SigningInputHex: hex.EncodeToString(in),
		SignatureHex: hex.EncodeToString(ed25519.Sign(priv, in)),
	}
	for k, val := range e.Headers() {
		switch x := val.(type) {
		case string:
			v.Headers[k] = x
		default:
			b, _ := json.Marshal(x)
			v.Headers[k] = string(b)
		}
	}
	tb := *e
	tb.Body = []byte("done: 3 files changed, tests pass ✗")
	th := *e
	th.To = "0f1e2d3c-4b5a-4697-8877-665544332212"
	tt := *e
	tt.ExpiresAt = e.ExpiresAt.Add(time.Millisecond)
	v.Tampered = []tamperCase{
		{"body, one character changed", hex.EncodeToString(tb.SigningInput())},
		{"to, one digit changed (a reroute)", hex.EncodeToString(th.SigningInput())},
		{"expiresAt one millisecond later", hex.EncodeToString(tt.SigningInput())},
	}
	return v
}

// TestSignatureGolden pins the signature of a fixed envelope under a fixed
// key, checks it with the Ring (as a receiving gateway does) and that every
// tampered input is refused.
func TestSignatureGolden(t *testing.T) {
	want := makeSignatureVector()
	if *updateGolden {
		b, _ := json.MarshalIndent(want, "", "  ")
		if err := os.WriteFile(signaturePath, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(signaturePath)
	if err != nil {
		t.Fatalf("%v (run go test ./keys -run TestSignatureGolden -args -update)", err)
	}
	var got signatureVector
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if got.SignatureHex != want.SignatureHex || got.SigningInputHex != want.SigningInputHex || got.PublicKeyOpenSSH != want.PublicKeyOpenSSH {
		t.Fatalf("signature vector changed: the wire format or the signing input moved (a break for every other gateway)")
	}
	pub, _ := hex.DecodeString(got.PublicKeyHex)
	in, _ := hex.DecodeString(got.SigningInputHex)
	sig, _ := hex.DecodeString(got.SignatureHex)
	if !ed25519.Verify(pub, in, sig) {
		t.Fatal("golden signature does not verify")
	}
	parsed, err := keys.ParsePublicKey(got.PublicKeyOpenSSH)
	if err != nil || !parsed.Equal(ed25519.PublicKey(pub)) {
		t.Fatalf("OpenSSH line: %v", err)
	}
	// as a gateway: the trust file line, a ring, Verify
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/"+keys.TrustFile, []byte(got.TrustFileLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := keys.LoadOrCreate(dir, "verifier"); err != nil {
		t.Fatal(err)
	}
	ring, err := keys.NewRing(dir, "verifier", nil)
	if err != nil {
		t.Fatal(err)
	}
	host := strings.Fields(got.TrustFileLine)[0]
	if err := ring.Verify(host, in, sig); err != nil {
		t.Fatalf("ring: %v", err)
	}
	for _, c := range got.Tampered {
		bad, _ := hex.DecodeString(c.SigningInputHex)
		if ed25519.Verify(pub, bad, sig) || ring.Verify(host, bad, sig) == nil {
			t.Errorf("tampered (%s) verifies", c.What)
		}
	}
	if b64 := base64.StdEncoding.EncodeToString(sig); len(b64) != 88 {
		t.Errorf("signature is %d base64 chars", len(b64))
	}
}
