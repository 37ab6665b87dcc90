package pairing

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha512"
	"errors"

	ristretto "github.com/bwesterb/go-ristretto"
	"github.com/cloudflare/circl/group"
)

// CPace over ristretto255 with SHA-512, as draft-irtf-cfrg-cpace-21
// specifies it (the ristretto255 section is the same in -19 and -20; -18
// and earlier differ) and checked against its test vectors
// (cpace_vectors_test.go). In the draft's words the joiner is party A,
// the initiator (it sends its share first), and the `herdbridge pair` host
// is party B, the responder.
//
// Why CPace and not an HMAC over the code: a MAC keyed by 30 bits can be
// brute-forced from one recorded transcript. Why circl: no PAKE is in
// golang.org/x/crypto, and of the modules the proxy serves, circl's group
// package (Cloudflare, maintained) has ristretto255; the construction on
// top is a page, written here against the draft. circl exposes no map
// from 64 uniform bytes to the group (its HashToElement is RFC 9380's,
// with expand_message_xmd, not what CPace's calculate_generator does), so
// the generator uses the go-ristretto module circl itself is built on.

// dsi is the draft's G.DSI for ristretto255; dsiISK its G.DSI_ISK. They
// are fixed by the ciphersuite: herdbridge's own label is in the channel
// identifier (channelID).
const (
	dsi    = "CPaceRistretto255"
	dsiISK = dsi + "_ISK"
	// sInBytes is H.s_in_bytes: SHA-512's input block size, which the
	// generator string's zero padding fills up to.
	sInBytes = 128
)

var r255 = group.Ristretto255

// shareLen is the size of an encoded ristretto255 element.
const shareLen = 32

// errBadShare is a peer share that is not a valid, non-identity element.
var errBadShare = errors.New("pairing: the peer's share is not a valid group element")

// prependLen is the draft's prepend_len: b prefixed by its length as an
// LEB128 varint, appended to dst.
func prependLen(dst, b []byte) []byte {
	n := len(b)
	for n >= 0x80 {
		dst = append(dst, byte(n)|0x80)
		n >>= 7
	}
	dst = append(dst, byte(n))
	return append(dst, b...)
}

// lvCat is the draft's lv_cat: each part with prependLen, concatenated, so
// no part can be shifted into its neighbour.
func lvCat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = prependLen(out, p)
	}
	return out
}

// generatorString is the draft's generator_string(G.DSI, PRS, CI, sid,
// H.s_in_bytes): the password padded with zeros so that DSI and PRS fill
// the hash's first input block.
func generatorString(prs, ci, sid []byte) []byte {
	zpad := max(0, sInBytes-1-len(prependLen(nil, prs))-len(prependLen(nil, []byte(dsi))))
	return lvCat([]byte(dsi), prs, make([]byte, zpad), ci, sid)
}

// calculateGenerator is the draft's calculate_generator for ristretto255:
// SHA-512 of the generator string, mapped to the group by RFC 9496's
// one-way map (element derivation from 64 uniform bytes), which is what
// go-ristretto's DeriveDalek computes.
func calculateGenerator(prs, ci, sid []byte) group.Element {
	p := new(ristretto.Point).DeriveDalek(generatorString(prs, ci, sid))
	g := r255.NewElement()
	if err := g.UnmarshalBinary(p.Bytes()); err != nil {
		panic("pairing: a derived ristretto255 element does not decode: " + err.Error()) // a canonical encoding always does
	}
	return g
}

// channelLabel names herdbridge's pairing protocol, and its version, in
// the channel identifier, so a generator derived for anything else (or
// for another version of this protocol) never matches.
const channelLabel = "herdbridge pairing v2"

// channelID is the draft's CI for a pairing: the protocol label and the
// code's nameplate (the meeting place on the broker).
func channelID(code Code) []byte {
	return lvCat([]byte(channelLabel), []byte(code.Nameplate()))
}

// generator is CPace's password-dependent generator for a pairing: PRS is
// the whole code, CI names the protocol and nameplate, sid is the joiner's
// session id.
func generator(code Code, sid []byte) group.Element {
	return calculateGenerator([]byte(code), channelID(code), sid)
}

// share is one party's ephemeral: a secret scalar y and Y = y·g.
type share struct {
	y   group.Scalar
	enc []byte // Y encoded, what goes on the wire
}

func newShare(code Code, sid []byte) (*share, error) {
	return shareOf(generator(code, sid), r255.RandomNonZeroScalar(rand.Reader))
}

// shareOf is the share y·g (the draft's Ya or Yb for scalar y).
func shareOf(g group.Element, y group.Scalar) (*share, error) {
	enc, err := r255.NewElement().Mul(g, y).MarshalBinaryCompress()
	if err != nil {
		return nil, err
	}
	return &share{y: y, enc: enc}, nil
}

// identityEnc is the encoding of ristretto255's neutral element G.I.
var identityEnc = make([]byte, shareLen)

// scalarMultVfy is the draft's scalar_mult_vfy(y, X): y times the element
// X encodes, or the encoding of G.I when X is not a canonical encoding of
// an element (or the product is G.I).
func scalarMultVfy(y group.Scalar, x []byte) []byte {
	if len(x) != shareLen {
		return identityEnc
	}
	P := r255.NewElement()
	if err := P.UnmarshalBinary(x); err != nil {
		return identityEnc
	}
	if again, err := P.MarshalBinaryCompress(); err != nil || !hmac.Equal(again, x) {
		return identityEnc
	}
	k, err := r255.NewElement().Mul(P, y).MarshalBinaryCompress()
	if err != nil {
		return identityEnc
	}
	return k
}

// secret is K = scalar_mult_vfy(y, Y') for the peer's encoded share: the
// same on both sides when both used the same code. G.I (an invalid
// encoding, or a peer forcing a known result) aborts, as the draft says.
func (s *share) secret(peer []byte) ([]byte, error) {
	k := scalarMultVfy(s.y, peer)
	if hmac.Equal(k, identityEnc) {
		return nil, errBadShare
	}
	return k, nil
}

// transcriptIR is the draft's transcript_ir(Ya, ADa, Yb, ADb), the
// initiator-responder ordering: A's share and associated data, then B's.
func transcriptIR(ya, ada, yb, adb []byte) []byte {
	return append(lvCat(ya, ada), lvCat(yb, adb)...)
}

// sessionKey is the draft's ISK: H(lv_cat(G.DSI_ISK, sid, K) ||
// transcript), so the session id, the secret and both parties' shares
// and associated data all go into it.
func sessionKey(sid, k, transcript []byte) []byte {
	h := sha512.New()
	h.Write(lvCat([]byte(dsiISK), sid, k))
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
// keeps one party's tag from being reflected as the other's. Key
// confirmation is herdbridge's, on top of the draft's ISK.
func confirmTag(isk []byte, role string, transcript []byte) []byte {
	m := hmac.New(sha512.New512_256, isk)
	m.Write(lvCat([]byte(role)))
	m.Write(transcript)
	return m.Sum(nil)
}

// equalTag compares tags in constant time.
func equalTag(got, want []byte) bool { return hmac.Equal(got, want) }
