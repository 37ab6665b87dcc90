package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
)

// Journal is a small append-only file of records that a bbolt store has
// not committed yet. A record is made safe against a process crash by one
// write(2), without an fsync: the page cache outlives the process. The
// store's next commit (whose fsync something else pays for) applies the
// records, and the journal is rewritten to hold only what is left. An OS
// crash or power loss can lose the unsynced tail; each user says what that
// costs (a message delivered again, a request id forgotten).
//
// Framing: 'J', payload length (4 bytes), payload, CRC-32C of all that
// (4 bytes), big-endian. A torn or damaged record ends the replay.
//
// A Journal is not safe for concurrent use: its owner serializes calls.
type Journal struct {
	f    *os.File
	size int64
	buf  []byte
}

const journalMagic = 'J'

// MaxJournalBytes bounds a journal: a replay reads no more, and an append
// past it fails (the owner then commits synchronously).
const MaxJournalBytes = 64 << 20

// ErrJournalFull is Append refusing a record past MaxJournalBytes.
var ErrJournalFull = errors.New("store: journal full")

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// AppendRecord frames payload onto b.
func AppendRecord(b, payload []byte) []byte {
	start := len(b)
	b = append(b, journalMagic)
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	b = append(b, payload...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b[start:], crcTable))
}

// DecodeRecords returns the payloads of the valid records at the start of
// b (sub-slices of b) and the length they take: b[valid:] is a torn or
// damaged tail.
func DecodeRecords(b []byte) (payloads [][]byte, valid int) {
	for valid < len(b) {
		p := b[valid:]
		if len(p) < 5 || p[0] != journalMagic {
			break
		}
		if len(p) < 9 {
			break
		}
		n := binary.BigEndian.Uint32(p[1:5])
		if uint64(n) > uint64(len(p)-9) {
			break
		}
		end := 5 + int(n)
		if crc32.Checksum(p[:end], crcTable) != binary.BigEndian.Uint32(p[end:end+4]) {
			break
		}
		payloads = append(payloads, p[5:end])
		valid += end + 4
	}
	return payloads, valid
}

// OpenJournal opens (creates, 0600) the journal at path and returns the
// payloads it holds; a torn tail (torn bytes) is cut off.
func OpenJournal(path string) (j *Journal, payloads [][]byte, torn int, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("store: journal: %w", err)
	}
	raw, err := io.ReadAll(io.LimitReader(f, MaxJournalBytes))
	if err != nil {
		f.Close()
		return nil, nil, 0, fmt.Errorf("store: journal %s: %w", path, err)
	}
	payloads, valid := DecodeRecords(raw)
	if torn = len(raw) - valid; torn > 0 {
		if err := f.Truncate(int64(valid)); err != nil {
			f.Close()
			return nil, nil, 0, fmt.Errorf("store: journal %s: cutting a torn tail: %w", path, err)
		}
	}
	return &Journal{f: f, size: int64(valid)}, payloads, torn, nil
}

// Append writes one record at the end: one write(2).
func (j *Journal) Append(payload []byte) error {
	if j.size >= MaxJournalBytes {
		return ErrJournalFull
	}
	j.buf = AppendRecord(j.buf[:0], payload)
	// a short write leaves size where it was: the next record overwrites
	// the torn one
	if _, err := j.f.WriteAt(j.buf, j.size); err != nil {
		return fmt.Errorf("store: journal: %w", err)
	}
	j.size += int64(len(j.buf))
	return nil
}

// Rewrite leaves only keep in the journal (everything else is committed).
// The records are written over the start, then the file is cut after
// them: a crash between the two leaves keep followed by older records,
// which the owner's replay must treat as harmless (already applied).
func (j *Journal) Rewrite(keep [][]byte) error {
	if j.size == 0 && len(keep) == 0 {
		return nil
	}
	j.buf = j.buf[:0]
	for _, p := range keep {
		j.buf = AppendRecord(j.buf, p)
	}
	if len(j.buf) > 0 {
		if _, err := j.f.WriteAt(j.buf, 0); err != nil {
			return fmt.Errorf("store: journal: %w", err)
		}
	}
	if err := j.f.Truncate(int64(len(j.buf))); err != nil {
		return fmt.Errorf("store: journal: %w", err)
	}
	j.size = int64(len(j.buf))
	return nil
}

// Close closes the file.
func (j *Journal) Close() error { return j.f.Close() }

// Sync makes every record appended so far durable: one fdatasync (an
// fsync where there is none). It may run while the owner appends: it
// touches only the file descriptor, through the runtime's own locking.
func (j *Journal) Sync() error {
	if err := datasync(j.f); err != nil {
		return fmt.Errorf("store: journal: %w", err)
	}
	return nil
}

// Size is the bytes of valid records the journal holds.
func (j *Journal) Size() int64 { return j.size }
