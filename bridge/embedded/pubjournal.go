package embedded

import (
	"encoding/binary"
	"errors"
)

// The publish journal: two store.Journal segments beside the store file
// (.pubs.0, .pubs.1). A publish is made durable by one appended record
// and one fdatasync that concurrent publishes share (pubsync.go), not by
// a bbolt commit, which costs two (its pages, then its meta page). The
// writer's next commit, at most journalApplyDelay later (journalApplyBytes sooner), copies the journaled
// messages into the store, in the transaction that carries the journaled
// acks (journalwork.go). A segment is emptied once every record in it is
// committed, and appends move to the other segment when a commit takes a
// batch: no segment is rewritten in place while it holds a record the
// store lacks, so a power loss during a rewrite cannot cost a synced one.
//
// Replay (Open) stores a record's message when its inbox exists and its
// sequence is past the inbox's committed sequence; any other record was
// committed before (and maybe acked since) and is skipped. So a segment
// not emptied in time, an old segment's leftovers after a power loss, or
// a record replayed twice store nothing twice.
//
// The crash story, by fault:
//   - kill -9: the appended records are in the page cache, which outlives
//     the process; the next Open replays them. Nothing a sender saw
//     confirmed is lost, whether or not its fdatasync had returned.
//   - power loss or OS crash: a record whose fdatasync returned is on the
//     disk; one whose fdatasync had not returned was never confirmed to
//     its sender (its Publish had not returned). A torn last record fails
//     its CRC-32C and is cut off with the rest of the tail.
//   - a failing fdatasync: the publish is committed to the store at once
//     instead; if that fails too the sender gets the error (the message
//     may still be delivered: it is in the journal and the index).
//
// Payload: 'P', record length (4 bytes), the inbox record (JSON), target
// count (2 bytes), then per target: gid length (2 bytes), gid, sequence
// (8 bytes); big-endian.

const pubMagic = 'P'

// maxPubTargets bounds a record's targets (a broadcast's inboxes).
const maxPubTargets = 1 << 16

type pubTarget struct {
	gid string
	seq uint64
}

var errPubTargets = errors.New("embedded: a publish routed to more inboxes than a journal record holds")

func encodePub(rec []byte, targets []pubTarget) ([]byte, error) {
	if len(targets) >= maxPubTargets {
		return nil, errPubTargets
	}
	n := 1 + 4 + len(rec) + 2
	for _, tg := range targets {
		n += 2 + len(tg.gid) + 8
	}
	b := make([]byte, 0, n)
	b = append(b, pubMagic)
	b = binary.BigEndian.AppendUint32(b, uint32(len(rec)))
	b = append(b, rec...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(targets)))
	for _, tg := range targets {
		b = binary.BigEndian.AppendUint16(b, uint16(len(tg.gid)))
		b = append(b, tg.gid...)
		b = binary.BigEndian.AppendUint64(b, tg.seq)
	}
	return b, nil
}

// decodePub reads a journal record: its file may be damaged, so every
// length is checked against what is there, never trusted.
func decodePub(p []byte) (rec []byte, targets []pubTarget, ok bool) {
	if len(p) < 5 || p[0] != pubMagic {
		return nil, nil, false
	}
	n := binary.BigEndian.Uint32(p[1:5])
	p = p[5:]
	if uint64(n) > uint64(len(p)) {
		return nil, nil, false
	}
	rec, p = p[:n], p[n:]
	if len(p) < 2 {
		return nil, nil, false
	}
	count := int(binary.BigEndian.Uint16(p))
	p = p[2:]
	for range count {
		if len(p) < 2 {
			return nil, nil, false
		}
		gl := int(binary.BigEndian.Uint16(p))
		if len(p) < 2+gl+8 {
			return nil, nil, false
		}
		targets = append(targets, pubTarget{gid: string(p[2 : 2+gl]), seq: binary.BigEndian.Uint64(p[2+gl:])})
		p = p[2+gl+8:]
	}
	return rec, targets, len(p) == 0
}
