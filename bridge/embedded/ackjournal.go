package embedded

import (
	"encoding/binary"
)

// The ack journal (a store.Journal beside transport.db): an ack is made
// safe against a process crash by one write(2) of a small record, without
// an fsync, and is applied to the store by the next group commit, whose
// fsync a publish pays anyway. So a round trip (a publish, then the ack of
// its delivery) costs one fsync, not two. An OS crash or power loss can
// lose the journal's unsynced tail: those messages are delivered again
// (at-least-once, as a broker does for an ack that never reached it).
// Replaying an ack the store already applied deletes nothing.
//
// Payload: gid length (2 bytes), gid, seq (8 bytes), big-endian.

type ackRec struct {
	gid string
	seq uint64
	// reason dead-letters the message as it is deleted: only a settle kept
	// in memory has one (settlelater.go); a journaled ack never does
	reason string
}

func encodeAck(r ackRec) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(len(r.gid)))
	b = append(b, r.gid...)
	return binary.BigEndian.AppendUint64(b, r.seq)
}

func decodeAck(p []byte) (ackRec, bool) {
	if len(p) < 2 {
		return ackRec{}, false
	}
	n := int(binary.BigEndian.Uint16(p))
	if len(p) != 2+n+8 {
		return ackRec{}, false
	}
	return ackRec{gid: string(p[2 : 2+n]), seq: binary.BigEndian.Uint64(p[2+n:])}, true
}
