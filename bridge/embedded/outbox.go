package embedded

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/herdbridge/herdbridge/bridge"
)

// The outbox: messages for other hosts accepted while the broker was
// unreachable, kept in this store (the same file, the same crash safety as
// the inboxes) in the order they were accepted, until the split transport
// has published them and the broker confirmed each. It is FIFO: Spool
// appends, OutboxHead reads the oldest, Unspool removes it.

// ErrOutboxFull is a Spool over the outbox's count or byte cap.
var ErrOutboxFull = errors.New("embedded: outbox full")

// Spooled is one message waiting in the outbox. Env is nil and Err set
// when its record does not decode (the file was damaged): the caller
// removes it and says so, it never wedges the outbox.
type Spooled struct {
	Seq       uint64
	Key       string // routing key to publish it with
	Mandatory bool
	Env       *bridge.Envelope
	Err       error
	Size      int // bytes it takes in the outbox
}

type spoolRecord struct {
	H  map[string]any    `json:"h"`
	HB map[string][]byte `json:"hb,omitempty"`
	B  []byte            `json:"b"`
	K  string            `json:"k"`
	M  bool              `json:"m,omitempty"` // mandatory
	At int64             `json:"at"`          // spooled at, Unix ms
}

var (
	outCountKey = []byte("n")
	outBytesKey = []byte("bytes")
)

// encodeSpool is the outbox record of env.
func encodeSpool(key string, env *bridge.Envelope, mandatory bool, at int64) ([]byte, error) {
	h, hb := splitHeaders(env.Headers())
	return json.Marshal(spoolRecord{H: h, HB: hb, B: env.Body, K: key, M: mandatory, At: at})
}

// decodeSpool reads an outbox record. Its input is this process's own
// file, but a damaged or hand-edited file must give an error, never a
// panic or an envelope that skipped validation.
func decodeSpool(raw []byte) (key string, mandatory bool, env *bridge.Envelope, err error) {
	var r spoolRecord
	if err := json.Unmarshal(raw, &r); err != nil {
		return "", false, nil, fmt.Errorf("outbox record: %w", err)
	}
	if r.K == "" {
		return "", false, nil, errors.New("outbox record: no routing key")
	}
	env, err = bridge.FromHeaders(joinHeaders(r.H, r.HB), r.B)
	if err != nil {
		return "", false, nil, fmt.Errorf("outbox record: %w", err)
	}
	return r.K, r.M, env, nil
}

// Spool appends env, to be published later with key, unless the outbox
// already holds maxCount messages or maxBytes bytes (ErrOutboxFull; a
// limit <= 0 is no limit). It returns once the message is durable.
func (t *Transport) Spool(key string, env *bridge.Envelope, mandatory bool, maxCount int, maxBytes int64) error {
	rec, err := encodeSpool(key, env, mandatory, t.opts.Now().UnixMilli())
	if err != nil {
		return fmt.Errorf("embedded: encode %s: %w", env.MsgID, err)
	}
	return t.write(func(tx *bolt.Tx) error {
		cnt := tx.Bucket(bktOutCnt)
		n, b := getCount(cnt, outCountKey), getCount(cnt, outBytesKey)
		if maxCount > 0 && n >= uint64(maxCount) {
			return fmt.Errorf("%w: it holds %d messages, its cap", ErrOutboxFull, n)
		}
		if maxBytes > 0 && b+uint64(len(rec)) > uint64(maxBytes) {
			return fmt.Errorf("%w: it holds %d bytes, and this message would pass its cap of %d", ErrOutboxFull, b, maxBytes)
		}
		q := tx.Bucket(bktOutbox)
		seq, _ := q.NextSequence()
		if err := q.Put(seqKey(seq), rec); err != nil {
			return err
		}
		if err := putCount(cnt, outCountKey, n+1); err != nil {
			return err
		}
		return putCount(cnt, outBytesKey, b+uint64(len(rec)))
	})
}

// OutboxHead is the oldest message in the outbox; nil when it is empty.
func (t *Transport) OutboxHead() (*Spooled, error) {
	s, err := t.OutboxPeek(1)
	if len(s) == 0 {
		return nil, err
	}
	return s[0], err
}

// OutboxPeek is the n oldest messages in the outbox, oldest first.
func (t *Transport) OutboxPeek(n int) ([]*Spooled, error) {
	var out []*Spooled
	err := t.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bktOutbox).Cursor()
		for k, v := c.First(); k != nil && len(out) < n; k, v = c.Next() {
			s := &Spooled{Size: len(v)}
			if len(k) == 8 {
				s.Seq = binary.BigEndian.Uint64(k)
			}
			s.Key, s.Mandatory, s.Env, s.Err = decodeSpool(v)
			out = append(out, s)
		}
		return nil
	})
	if errors.Is(err, bolt.ErrDatabaseNotOpen) {
		return nil, bridge.ErrClosed
	}
	return out, err
}

// Unspool removes the messages seqs from the outbox, in one commit (a
// seq already gone is skipped).
func (t *Transport) Unspool(seqs ...uint64) error {
	return t.write(func(tx *bolt.Tx) error {
		q := tx.Bucket(bktOutbox)
		cnt := tx.Bucket(bktOutCnt)
		n, b := getCount(cnt, outCountKey), getCount(cnt, outBytesKey)
		for _, seq := range seqs {
			v := q.Get(seqKey(seq))
			if v == nil {
				continue
			}
			size := uint64(len(v))
			if err := q.Delete(seqKey(seq)); err != nil {
				return err
			}
			n, b = n-min(n, 1), b-min(b, size)
		}
		if err := putCount(cnt, outCountKey, n); err != nil {
			return err
		}
		return putCount(cnt, outBytesKey, b)
	})
}

// OutboxLen is how many messages and bytes the outbox holds.
func (t *Transport) OutboxLen() (n int, bytes int64) {
	_ = t.db.View(func(tx *bolt.Tx) error {
		cnt := tx.Bucket(bktOutCnt)
		n, bytes = int(getCount(cnt, outCountKey)), int64(getCount(cnt, outBytesKey))
		return nil
	})
	return n, bytes
}

// HasInbox reports whether gid's inbox is declared in this store.
func (t *Transport) HasInbox(gid string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.inboxes[gid] != nil
}
