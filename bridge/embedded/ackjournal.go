package embedded

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
)

// The ack journal: an ack is made safe against a process crash by one
// write(2) of a small record to this file, without an fsync — the page
// cache outlives the process — and is applied to the store by the next
// group commit, whose fsync a publish pays anyway. So a round trip (a
// publish, then the ack of its delivery) costs one fsync, not two. An OS
// crash or power loss can lose the journal's unsynced tail: those messages
// are delivered again (at-least-once, as a broker does for an ack that
// never reached it). Once every ack in it is committed the journal is
// truncated; replaying an ack the store already applied deletes nothing.
//
// Record: 'A', gid length (2 bytes), gid, seq (8 bytes), CRC-32C of all
// that (4 bytes), all big-endian. A torn or damaged tail ends the replay.

const ackMagic = 'A'

var crcTable = crc32.MakeTable(crc32.Castagnoli)

type ackRec struct {
	gid string
	seq uint64
}

// appendAck encodes r onto b.
func appendAck(b []byte, r ackRec) []byte {
	start := len(b)
	b = append(b, ackMagic)
	b = binary.BigEndian.AppendUint16(b, uint16(len(r.gid)))
	b = append(b, r.gid...)
	b = binary.BigEndian.AppendUint64(b, r.seq)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b[start:], crcTable))
}

// decodeAcks decodes the valid records at the start of b; valid is the
// length they take, so b[valid:] is a torn or damaged tail (ignored).
func decodeAcks(b []byte) (recs []ackRec, valid int) {
	for len(b[valid:]) > 0 {
		r, n, ok := decodeAck(b[valid:])
		if !ok {
			break
		}
		recs = append(recs, r)
		valid += n
	}
	return recs, valid
}

func decodeAck(b []byte) (ackRec, int, bool) {
	if len(b) < 3 || b[0] != ackMagic {
		return ackRec{}, 0, false
	}
	n := int(binary.BigEndian.Uint16(b[1:3]))
	end := 3 + n + 8
	if len(b) < end+4 || crc32.Checksum(b[:end], crcTable) != binary.BigEndian.Uint32(b[end:end+4]) {
		return ackRec{}, 0, false
	}
	return ackRec{gid: string(b[3 : 3+n]), seq: binary.BigEndian.Uint64(b[3+n : end])}, end + 4, true
}

// ackJournal is the open journal file. Its methods are called with the
// transport's pending-ack lock held.
type ackJournal struct {
	f    *os.File
	size int64
	buf  []byte
}

// openAckJournal opens (creates) the journal at path and returns the acks
// it holds; a torn tail is reported in torn (bytes) and cut off.
func openAckJournal(path string) (j *ackJournal, recs []ackRec, torn int, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("embedded: ack journal: %w", err)
	}
	raw, err := io.ReadAll(io.LimitReader(f, maxJournalBytes))
	if err != nil {
		f.Close()
		return nil, nil, 0, fmt.Errorf("embedded: ack journal %s: %w", path, err)
	}
	recs, valid := decodeAcks(raw)
	j = &ackJournal{f: f, size: int64(valid)}
	if torn = len(raw) - valid; torn > 0 {
		if err := f.Truncate(int64(valid)); err != nil {
			f.Close()
			return nil, nil, 0, fmt.Errorf("embedded: ack journal %s: cutting a torn tail: %w", path, err)
		}
	}
	return j, recs, torn, nil
}

// maxJournalBytes bounds what a replay reads: the journal is truncated
// after every group commit, so it never holds more than the acks of one
// commit interval; anything past this is not ours.
const maxJournalBytes = 64 << 20

var errJournalFull = errors.New("embedded: ack journal full")

// append writes r at the end of the journal: one write(2).
func (j *ackJournal) append(r ackRec) error {
	if j.size >= maxJournalBytes {
		return errJournalFull
	}
	j.buf = appendAck(j.buf[:0], r)
	// a short write leaves size where it was: the next record overwrites
	// the torn one
	if _, err := j.f.WriteAt(j.buf, j.size); err != nil {
		return fmt.Errorf("embedded: ack journal: %w", err)
	}
	j.size += int64(len(j.buf))
	return nil
}

// rewrite leaves in the journal only keep, the acks not yet committed
// (every other one is in the store now). The records are written over the
// start, then the file is cut after them: a crash between the two leaves
// keep followed by old records, and replaying an old one deletes nothing.
func (j *ackJournal) rewrite(keep []ackRec) error {
	if j.size == 0 && len(keep) == 0 {
		return nil
	}
	j.buf = j.buf[:0]
	for _, r := range keep {
		j.buf = appendAck(j.buf, r)
	}
	if len(j.buf) > 0 {
		if _, err := j.f.WriteAt(j.buf, 0); err != nil {
			return fmt.Errorf("embedded: ack journal: %w", err)
		}
	}
	if err := j.f.Truncate(int64(len(j.buf))); err != nil {
		return fmt.Errorf("embedded: ack journal: %w", err)
	}
	j.size = int64(len(j.buf))
	return nil
}

func (j *ackJournal) close() error { return j.f.Close() }
