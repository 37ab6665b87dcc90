package pairing

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha512"
	"encoding/binary"
	"errors"

	"github.com/cloudflare/circl/group"
)

// CPace over ristretto255 (draft-irtf-cfrg-cpace), in the order this
// package runs it: the joiner sends its share first, the initiator answers
// with its own and a confirmation.
//
// Why CPace and not an HMAC over the code: a MAC keyed by 30 bits can be
// brute-forced from one recorded transcript. Why circl: no PAKE is in
// golang.org/x/crypto, and of the modules the proxy serves, circl's group
// package (Cloudflare, maintained) has ristretto255 with RFC 9380
// hash-to-group, which is all CPace needs; the construction on top is a
// page, written here against the draft.

// dsi separates this protocol's hashes from every other use of the group.
const dsi = "herdbridge-pair-v1 CPace-ristretto255"

var r255 = group.Ristretto255

// shareLen is the size of an encoded ristretto255 element.
const shareLen = 32

// errBadShare is a peer share that is not a valid, non-identity element.
var errBadShare = errors.New("pairing: the peer's share is not a valid group element")

// lv appends b to dst prefixed by its length (two bytes, big endian), so
// concatenated fields cannot be shifted into one another.
func lv(dst, b []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(b)))
	return append(dst, b...)
}

// generator is CPace's password-dependent generator: the code (the PRS),
// the channel identifier (the nameplate) and the session id, hashed to
// the group.
func generator(code Code, sid []byte) group.Element {
	var msg []byte
	msg = lv(msg, []byte(code))
	msg = lv(msg, []byte(code.Nameplate()))
	msg = lv(msg, sid)
	return r255.HashToElement(msg, []byte(dsi))
}

// share is one party's ephemeral: a random scalar y and Y = y·g.
type share struct {
	y   group.Scalar
	enc []byte // Y encoded, what goes on the wire
}

func newShare(code Code, sid []byte) (*share, error) {
	y := r255.RandomNonZeroScalar(rand.Reader)
	Y := r255.NewElement().Mul(generator(code, sid), y)
	enc, err := Y.MarshalBinaryCompress()
	if err != nil {
		return nil, err
	}
	return &share{y: y, enc: enc}, nil
}

// secret is y·Y' for the peer's encoded share: the same on both sides
// when both used the same code. It refuses an encoding that is not
// canonical or is the identity (a peer forcing a known result).
func (s *share) secret(peer []byte) ([]byte, error) {
	if len(peer) != shareLen {
		return nil, errBadShare
	}
	P := r255.NewElement()
	if err := P.UnmarshalBinary(peer); err != nil {
		return nil, errBadShare
	}
	if again, err := P.MarshalBinaryCompress(); err != nil || !hmac.Equal(again, peer) || P.IsIdentity() {
		return nil, errBadShare
	}
	K := r255.NewElement().Mul(P, s.y)
	if K.IsIdentity() {
		return nil, errBadShare
	}
	return K.MarshalBinaryCompress()
}

// sessionKey is CPace's ISK: the shared secret hashed with the session id
// and the whole transcript (both shares and both parties' host ids and
// keys), so a change to any of them gives different keys.
func sessionKey(sid, k, transcript []byte) []byte {
	h := sha512.New()
	h.Write(lv(nil, []byte(dsi+" ISK")))
	h.Write(lv(nil, sid))
	h.Write(lv(nil, k))
	h.Write(transcript)
	return h.Sum(nil)
}

// Roles of a confirmation tag: who proves what.
const (
	tagInitiator = "initiator confirms"
	tagJoiner    = "joiner confirms"
	tagDone      = "initiator pinned"
)

// confirmTag is the HMAC a party sends to prove it derived isk; role
// keeps one party's tag from being reflected as the other's.
func confirmTag(isk []byte, role string, transcript []byte) []byte {
	m := hmac.New(sha512.New512_256, isk)
	m.Write(lv(nil, []byte(role)))
	m.Write(transcript)
	return m.Sum(nil)
}

// equalTag compares tags in constant time.
func equalTag(got, want []byte) bool { return hmac.Equal(got, want) }
