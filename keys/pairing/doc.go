// Package pairing joins two hosts' trust files without copying keys: one
// host (the initiator, `herdbridge pair`) shows a short one-time code, the
// other (the joiner, `herdbridge pair CODE`) types it, and the two exchange
// and pin each other's Ed25519 host keys over a [Room] on the broker,
// authenticated by the code.
//
// The code is low-entropy (30 secret bits), so it is never sent, nor is
// anything an eavesdropper could test guesses against offline: the
// exchange is a PAKE — CPace over ristretto255 and SHA-512 as
// draft-irtf-cfrg-cpace-21 specifies it (checked against its test
// vectors), on the group of github.com/cloudflare/circl. Each party's share is a random multiple of
// a generator derived from the code, so a party who does not know the code
// gets one guess per attempt, and an onlooker none. Both host ids and keys
// are bound into the derived key; each side proves it holds that key with
// an HMAC (key confirmation) before anything is pinned.
//
// The first two characters of a code name the meeting place on the broker
// (the nameplate, public, like magic-wormhole's); the other six are the
// secret, and the whole code is the PAKE password.
//
// The initiator counts wrong attempts (a confirmation that does not
// verify, a joiner that reports a mismatch, a replayed message) and gives
// up after [Options.MaxFailures]; a code works once and expires.
//
// The package knows nothing of AMQP: the broker side of a Room lives in
// bridge/broker, and the gateway package joins the two. It must not import
// bridge.
package pairing
