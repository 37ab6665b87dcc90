package bridge

import (
	"crypto/hpke"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
)

// Sealed bodies (issue 23). A body crossing the broker is encrypted to
// the recipient host's HPKE key (RFC 9180), so the broker, its disk and
// anyone reading its queues see only the headers. The suite:
//
//	KEM  ML-KEM-768 + X25519 (hybrid, post-quantum)
//	KDF  HKDF-SHA256
//	AEAD ChaCha20-Poly1305
//
// ChaCha20-Poly1305 over AES-256-GCM: it is constant-time in software on
// every CPU a gateway runs on (ARM boards without AES instructions
// included), and per message the KEM costs far more than either AEAD, so
// AES-NI's speed would not show (keys/bench_envelope_test.go).
//
// The HPKE info binds the routing facts (kind, msgId, from, to, host, ts
// and the key id): a sealed body moved to another envelope does not open.
// The body on the wire is the base64 of HPKE's enc ‖ ciphertext, so it
// stays UTF-8 text like every body; the signature covers it and the seal
// headers, so the receiver verifies first and opens after.

// SealScheme is the one scheme this build seals with and opens.
const SealScheme = "hpke/mlkem768x25519/hkdf-sha256/chacha20poly1305"

// sealInfoDomain separates herdbridge's HPKE info from any other use.
const sealInfoDomain = "herdbridge/seal/v1"

// maxSealKeyID bounds the key id header.
const maxSealKeyID = 64

// unsealedKinds carry no sender-written text (metadata only, or a
// heartbeat every host reads) and so are never sealed. A broadcast is
// one publish to many hosts' inboxes and cannot be sealed to each.
var unsealedKinds = map[Kind]bool{
	KindPresence: true, KindTrace: true, KindTraceAnswer: true, KindDeadLetter: true, KindGiveUp: true, KindBroadcast: true,
	KindPresenceAsk: true, KindPresenceSnapshot: true,
}

// Sealable reports whether k is a kind whose body is sealed across hosts.
func (k Kind) Sealable() bool { return kinds[k] && !unsealedKinds[k] }

// ErrUnseal is a sealed body that does not open: no key of that id here,
// or the ciphertext, or the envelope it is bound to, was changed.
var ErrUnseal = errors.New("bridge: sealed body does not open")

func sealKeyIDOK(id string) bool {
	if id == "" || len(id) > maxSealKeyID {
		return false
	}
	for _, c := range []byte(id) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == ':' || c == '-' || c == '_'
		if !ok {
			return false
		}
	}
	return true
}

// validateSeal checks the seal headers of e (Validate): both or neither,
// the one scheme, a key id of the right form, a kind that is sealed.
func (e *Envelope) validateSeal() error {
	if e.Seal == "" && e.SealKey == "" {
		return nil
	}
	switch {
	case e.Seal != SealScheme:
		return malformed("seal %.80q is not a scheme this gateway opens (%s)", e.Seal, SealScheme)
	case !sealKeyIDOK(e.SealKey):
		return malformed("sealKey %.80q is not a key id", e.SealKey)
	case !e.Kind.Sealable():
		return malformed("a %s is never sealed", e.Kind)
	}
	return nil
}

// Sealed reports whether e's body is sealed.
func (e *Envelope) Sealed() bool { return e.Seal != "" }

// SealInfo is the HPKE info of e: the domain, a NUL, then kind, msgId,
// from, to, host, ts (Unix ms, decimal) and the key id, each as a 4-byte
// big-endian length and its bytes.
func (e *Envelope) SealInfo(keyID string) []byte {
	fields := [...]string{string(e.Kind), e.MsgID, e.From, e.To, e.Host, strconv.FormatInt(e.TS.UnixMilli(), 10), keyID}
	b := make([]byte, 0, 160)
	b = append(b, sealInfoDomain...)
	b = append(b, 0)
	for _, f := range fields {
		b = binary.BigEndian.AppendUint32(b, uint32(len(f)))
		b = append(b, f...)
	}
	return b
}

// SealBody encrypts e's body to pub (key id keyID) in place and sets the
// seal headers. Sign e after it: the signature covers the ciphertext.
func (e *Envelope) SealBody(pub hpke.PublicKey, keyID string) error {
	if !e.Kind.Sealable() {
		return fmt.Errorf("bridge: a %s is never sealed", e.Kind)
	}
	if !sealKeyIDOK(keyID) {
		return fmt.Errorf("bridge: %.80q is not a key id", keyID)
	}
	ct, err := hpke.Seal(pub, hpke.HKDFSHA256(), hpke.ChaCha20Poly1305(), e.SealInfo(keyID), e.Body)
	if err != nil {
		return fmt.Errorf("bridge: sealing: %w", err)
	}
	e.Seal, e.SealKey = SealScheme, keyID
	e.Body = base64.StdEncoding.AppendEncode(nil, ct)
	return nil
}

// OpenBody decrypts a sealed e in place with priv (the key e.SealKey
// names) and clears the seal headers: from here on e is what its sender
// wrote. Verify the signature before: it is over the sealed form.
func (e *Envelope) OpenBody(priv hpke.PrivateKey) error {
	if !e.Sealed() {
		return nil
	}
	ct, err := base64.StdEncoding.AppendDecode(nil, e.Body)
	if err != nil {
		return fmt.Errorf("%w: body is not base64", ErrUnseal)
	}
	pt, err := hpke.Open(priv, hpke.HKDFSHA256(), hpke.ChaCha20Poly1305(), e.SealInfo(e.SealKey), ct)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnseal, err)
	}
	if len(pt) > MaxBodyBytes {
		return fmt.Errorf("%w: %d bytes, over %d", ErrOversized, len(pt), MaxBodyBytes)
	}
	e.Body, e.Seal, e.SealKey = pt, "", ""
	if err := e.Validate(); err != nil { // the plaintext must be a body too (UTF-8)
		return err
	}
	return nil
}
