package bridge

import (
	"crypto/hpke"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/crypto/chacha20poly1305"
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
// heartbeat every host reads) and so are never sealed to one host. A
// broadcast is one publish to many hosts' inboxes: it is sealed to all
// of them at once (SealMultiScheme, SealBroadcast), never with SealScheme.
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
	case e.Seal == SealMultiScheme:
		if e.Kind != KindBroadcast {
			return malformed("a %s is never sealed to many hosts", e.Kind)
		}
		if e.SealKey != SealMultiKey {
			return malformed("sealKey %.80q of a broadcast sealed to many hosts is not %q", e.SealKey, SealMultiKey)
		}
		return nil
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

// A broadcast is one publish that the inboxes of many hosts read, so it
// cannot be sealed to one host's key. It is sealed once, under a random
// 32-byte content key (ChaCha20-Poly1305, a zero nonce: the key is used
// once), and that key is wrapped with HPKE to each recipient host's key
// (the suite of SealScheme). The body on the wire is the base64 of
//
//	count         2 bytes, big-endian (1..MaxSealHosts)
//	count times:  host (1-byte length, bytes), key id (1-byte length,
//	              bytes), wrapped key (2-byte length, HPKE enc ‖ ciphertext)
//	the rest:     the body's ciphertext
//
// A key is wrapped with the HPKE info SealInfo(keyID) followed by the
// host (4-byte length, bytes); the body's AEAD additional data is
// SealInfo(SealMultiKey). The signature covers all of it and the seal
// headers, so no recipient list can be changed or moved to another
// envelope. Each recipient costs ~1.5 KiB of base64 (ML-KEM-768's
// ciphertext): MaxSealHosts bounds it.
const (
	// SealMultiScheme is the seal header of a broadcast sealed to many hosts.
	SealMultiScheme = "hpke-multi/mlkem768x25519/hkdf-sha256/chacha20poly1305"
	// SealMultiKey is its sealKey header: the keys are in the body.
	SealMultiKey = "per-host"
	// MaxSealHosts caps the hosts one broadcast is sealed to (~100 KiB of
	// wrapped keys); a broadcast to more goes clear (seal auto) or is
	// refused (seal require).
	MaxSealHosts = 64
)

// SealRecipient is one host a broadcast is sealed to.
type SealRecipient struct {
	Host  string
	KeyID string
	Pub   hpke.PublicKey
}

func (e *Envelope) wrapInfo(keyID, host string) []byte {
	b := e.SealInfo(keyID)
	b = binary.BigEndian.AppendUint32(b, uint32(len(host)))
	return append(b, host...)
}

// SealBroadcast seals a broadcast's body to every recipient in place and
// sets the seal headers. Sign e after it.
func (e *Envelope) SealBroadcast(rs []SealRecipient) error {
	if e.Kind != KindBroadcast {
		return fmt.Errorf("bridge: a %s is never sealed to many hosts", e.Kind)
	}
	if len(rs) == 0 || len(rs) > MaxSealHosts {
		return fmt.Errorf("bridge: a broadcast is sealed to 1 to %d hosts, not %d", MaxSealHosts, len(rs))
	}
	key := make([]byte, chacha20poly1305.KeySize)
	if _, err := rand.Read(key); err != nil {
		return fmt.Errorf("bridge: sealing: %w", err)
	}
	raw := binary.BigEndian.AppendUint16(nil, uint16(len(rs)))
	for _, r := range rs {
		if !sealKeyIDOK(r.KeyID) || r.Host == "" || len(r.Host) > 255 {
			return fmt.Errorf("bridge: sealing to host %.80q key %.80q: not a host and key id", r.Host, r.KeyID)
		}
		w, err := hpke.Seal(r.Pub, hpke.HKDFSHA256(), hpke.ChaCha20Poly1305(), e.wrapInfo(r.KeyID, r.Host), key)
		if err != nil {
			return fmt.Errorf("bridge: sealing to %s: %w", r.Host, err)
		}
		raw = append(raw, byte(len(r.Host)))
		raw = append(raw, r.Host...)
		raw = append(raw, byte(len(r.KeyID)))
		raw = append(raw, r.KeyID...)
		raw = binary.BigEndian.AppendUint16(raw, uint16(len(w)))
		raw = append(raw, w...)
	}
	aead, err := chacha20poly1305.New(key)
	if err != nil {
		return fmt.Errorf("bridge: sealing: %w", err)
	}
	raw = aead.Seal(raw, make([]byte, aead.NonceSize()), e.Body, e.SealInfo(SealMultiKey))
	e.Seal, e.SealKey = SealMultiScheme, SealMultiKey
	e.Body = base64.StdEncoding.AppendEncode(nil, raw)
	return nil
}

// ErrNotARecipient is a broadcast sealed to other hosts only.
var ErrNotARecipient = fmt.Errorf("%w: not sealed to this host", ErrUnseal)

// OpenBroadcast opens a broadcast sealed to many hosts in place, with
// host's entry and the private key priv returns for its key id, and
// clears the seal headers. Verify the signature before.
func (e *Envelope) OpenBroadcast(host string, priv func(keyID string) (hpke.PrivateKey, bool)) error {
	if e.Seal != SealMultiScheme {
		return fmt.Errorf("%w: not sealed to many hosts", ErrUnseal)
	}
	raw, err := base64.StdEncoding.AppendDecode(nil, e.Body)
	if err != nil {
		return fmt.Errorf("%w: body is not base64", ErrUnseal)
	}
	short := fmt.Errorf("%w: recipient list cut short", ErrUnseal)
	if len(raw) < 2 {
		return short
	}
	n := int(binary.BigEndian.Uint16(raw))
	if n == 0 || n > MaxSealHosts {
		return fmt.Errorf("%w: sealed to %d hosts", ErrUnseal, n)
	}
	raw = raw[2:]
	var key []byte
	var heldNone []string
	for range n {
		if len(raw) < 1 || len(raw) < 1+int(raw[0]) {
			return short
		}
		h := string(raw[1 : 1+raw[0]])
		raw = raw[1+int(raw[0]):]
		if len(raw) < 1 || len(raw) < 1+int(raw[0]) {
			return short
		}
		id := string(raw[1 : 1+raw[0]])
		raw = raw[1+int(raw[0]):]
		if len(raw) < 2 || len(raw) < 2+int(binary.BigEndian.Uint16(raw)) {
			return short
		}
		w := raw[2 : 2+int(binary.BigEndian.Uint16(raw))]
		raw = raw[2+len(w):]
		if h != host || key != nil {
			continue
		}
		k, ok := priv(id)
		if !ok {
			heldNone = append(heldNone, id)
			continue
		}
		ck, err := hpke.Open(k, hpke.HKDFSHA256(), hpke.ChaCha20Poly1305(), e.wrapInfo(id, h), w)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUnseal, err)
		}
		key = ck
	}
	if key == nil {
		if len(heldNone) > 0 {
			return fmt.Errorf("%w: sealed to HPKE key %s, which this host does not hold (rotated away past its window)", ErrUnseal, heldNone[0])
		}
		return fmt.Errorf("%w (sealed to %d other hosts)", ErrNotARecipient, n)
	}
	aead, err := chacha20poly1305.New(key)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnseal, err)
	}
	pt, err := aead.Open(nil, make([]byte, aead.NonceSize()), raw, e.SealInfo(SealMultiKey))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnseal, err)
	}
	if len(pt) > MaxBodyBytes {
		return fmt.Errorf("%w: %d bytes, over %d", ErrOversized, len(pt), MaxBodyBytes)
	}
	e.Body, e.Seal, e.SealKey = pt, "", ""
	return e.Validate()
}
