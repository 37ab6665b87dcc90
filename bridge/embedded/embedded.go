// Package embedded is the single-host transport: inboxes, bindings and the
// dead-letter queue live in one bbolt file in the gateway's state directory,
// routed in-process with the observable semantics of the broker topology
// (SPEC §6). It owns that file and nothing else; it knows nothing of
// entities, waiters or MCP.
//
// bbolt was chosen because it is a single pure-Go file with ACID
// transactions and a crash-safe page layout: a kill -9 at any instant leaves
// either the old or the new state, never a torn one, which is exactly what
// "nothing lost on a crash" needs, with no server and no cgo.
package embedded

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/store"
)

var _ bridge.Transport = (*Transport)(nil)

var (
	bktInbox  = []byte("inbox")  // sub-bucket per gid: seq -> record
	bktBind   = []byte("bind")   // gid -> inboxMeta
	bktCount  = []byte("count")  // gid -> uint64 messages stored
	bktDLQ    = []byte("dlq")    // seq -> deadRecord
	bktDLQCnt = []byte("dlqcnt") // "n" -> uint64
	bktOutbox = []byte("outbox") // seq -> spoolRecord (outbox.go)
	bktOutCnt = []byte("outcnt") // "n", "bytes" -> uint64
)

// Options tune the transport.
type Options struct {
	// DLQMax caps the dead-letter queue; past it the oldest entry is dropped
	// with a warning (SPEC §4: bridge.dlq is itself capped).
	DLQMax int
	// NoSync skips fsync on commit and the publish journal's fdatasync: a
	// process crash still loses nothing, only an OS crash or power loss
	// can. Off by default.
	NoSync bool
	Logger *slog.Logger
	// Now is the clock (tests).
	Now func() time.Time
}

// Transport is the embedded transport. Create it with Open.
type Transport struct {
	db   *bolt.DB
	path string
	opts Options
	log  *slog.Logger

	mu      sync.Mutex
	inboxes map[string]*inbox
	dlqCons *consumer
	closed  bool
	stop    chan struct{}
	wg      sync.WaitGroup

	writer *store.GroupWriter // group commit (commit.go)

	// journaled publishes (pubjournal.go) and lazy acks (lazyack.go); pmu
	// is a leaf: never held while waiting for the store or a lock
	pmu     sync.Mutex
	pend    pendingPubs
	journal *store.Journal
	pendAck map[string]map[uint64]bool // acked and journaled, not yet committed
	snapMu  sync.RWMutex               // a read of the store and the index (R) before a commit's batch leaves the index (W)
	toApply []ackRec                   // journaled, not yet taken by a commit

	// group sync of the publish journal (pubsync.go)
	syncMu    sync.Mutex
	syncedLSN uint64
}

type inboxMeta struct {
	Groups     []string      `json:"groups"`
	MaxLength  int           `json:"maxLength"`
	MessageTTL time.Duration `json:"messageTtl"`
}

type inbox struct {
	gid    string
	meta   inboxMeta
	groups map[string]bool
	cons   *consumer
	// delivered holds the sequences handed to some consumer and not yet
	// settled; loaded is the queue's last sequence when the store was
	// opened: those may have been delivered before (Delivery.Redelivered).
	delivered map[uint64]bool
	loaded    uint64
	// closed: CloseInbox was called, nothing more is routed here;
	// publishing counts publishes routed here whose write is not done
	// (both under Transport.mu)
	closed     bool
	publishing int
}

type record struct {
	H  map[string]any    `json:"h"`
	HB map[string][]byte `json:"hb,omitempty"` // byte-valued headers (sig)
	B  []byte            `json:"b"`
	At int64             `json:"at"`          // enqueue time, Unix ms
	K  string            `json:"k,omitempty"` // routing key it was published with
}

type deadRecord struct {
	H      map[string]any    `json:"h"`
	HB     map[string][]byte `json:"hb,omitempty"`
	B      []byte            `json:"b"`
	Reason string            `json:"reason"`
	Queue  string            `json:"queue"`
	At     int64             `json:"at"`
}

// splitHeaders moves byte-valued headers (the signature) out of h, so JSON
// gives them back as bytes rather than as base64 text.
func splitHeaders(h map[string]any) (map[string]any, map[string][]byte) {
	var hb map[string][]byte
	out := make(map[string]any, len(h))
	for k, v := range h {
		if b, ok := v.([]byte); ok {
			if hb == nil {
				hb = map[string][]byte{}
			}
			hb[k] = b
			continue
		}
		out[k] = v
	}
	return out, hb
}

// joinHeaders is the inverse of splitHeaders.
func joinHeaders(h map[string]any, hb map[string][]byte) map[string]any {
	if len(hb) == 0 {
		return h
	}
	out := make(map[string]any, len(h)+len(hb))
	for k, v := range h {
		out[k] = v
	}
	for k, v := range hb {
		out[k] = v
	}
	return out
}

// Open opens (creating if needed) the store at path. A file that is not a
// valid store is an error naming the file; nothing is deleted or rewritten.
func Open(path string, opts Options) (*Transport, error) {
	if opts.DLQMax <= 0 {
		opts.DLQMax = 10000
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := store.RefuseZeroLength(path); err != nil {
		return nil, err
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second, NoSync: opts.NoSync})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return nil, fmt.Errorf("embedded: %s is locked by another process: is a gateway already running on this state dir?", path)
		}
		return nil, fmt.Errorf("embedded: cannot open store %s (%w): if it is corrupt, move it aside to start with an empty store; nothing was deleted", path, err)
	}
	t := &Transport{db: db, path: path, opts: opts, log: opts.Logger, inboxes: map[string]*inbox{}, stop: make(chan struct{}),
		pendAck: map[string]map[uint64]bool{}, pend: newPendingPubs()}
	if err := t.load(); err != nil {
		db.Close()
		return nil, fmt.Errorf("embedded: store %s is unreadable (%w): move it aside to start with an empty store; nothing was deleted", path, err)
	}
	// publishes before acks: an ack may name a message only the publish
	// journal holds
	if err := t.replayPubs(path); err != nil {
		t.closeJournals()
		db.Close()
		return nil, err
	}
	if err := t.replayAcks(path + ackJournalSuffix); err != nil {
		t.closeJournals()
		db.Close()
		return nil, err
	}
	if err := t.loadSequences(); err != nil {
		t.closeJournals()
		db.Close()
		return nil, fmt.Errorf("embedded: store %s is unreadable (%w): move it aside to start with an empty store; nothing was deleted", path, err)
	}
	t.startWriter()
	t.wg.Add(1)
	go t.sweep()
	return t, nil
}

// ackJournalSuffix names the ack journal beside the store file.
const ackJournalSuffix = ".acks"

// Check judges the store at path before Open (see store.CheckFile): a
// damaged file is a *store.DamageError naming it and the repair command,
// never a panic. Messages counts the messages its inboxes and dead-letter
// queue hold, inboxes the bound inboxes.
func Check(path string) (fi store.FileInfo, inboxes, messages int, err error) {
	fi, err = store.CheckFile(path)
	return fi, fi.Keys[string(bktBind)], fi.Keys[string(bktInbox)] + fi.Keys[string(bktDLQ)], err
}

func (t *Transport) load() error {
	return t.db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bktInbox, bktBind, bktCount, bktDLQ, bktDLQCnt, bktOutbox, bktOutCnt, bktFloor} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		return tx.Bucket(bktBind).ForEach(func(k, v []byte) error {
			var m inboxMeta
			if err := json.Unmarshal(v, &m); err != nil {
				return fmt.Errorf("binding of inbox %s: %w", k, err)
			}
			if tx.Bucket(bktInbox).Bucket(k) == nil {
				return fmt.Errorf("inbox %s has a binding but no queue", k)
			}
			t.inboxes[string(k)] = newInbox(string(k), m)
			return nil
		})
	})
}

func newInbox(gid string, m inboxMeta) *inbox {
	ib := &inbox{gid: gid, meta: m, groups: map[string]bool{}, delivered: map[uint64]bool{}}
	for _, g := range m.Groups {
		ib.groups[g] = true
	}
	return ib
}

// Close stops every consumer and closes the store. Idempotent.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	close(t.stop)
	var cons []*consumer
	for _, ib := range t.inboxes {
		if ib.cons != nil {
			cons = append(cons, ib.cons)
		}
	}
	if t.dlqCons != nil {
		cons = append(cons, t.dlqCons)
	}
	t.mu.Unlock()
	for _, c := range cons {
		c.Cancel()
	}
	t.wg.Wait()
	t.stopWriter()
	var err error
	if apply, done := t.journalWork(); apply != nil { // what the last commits did not carry
		err = t.db.Update(apply)
		done(err)
	}
	if jerr := t.closeJournals(); err == nil {
		err = jerr
	}
	if cerr := t.db.Close(); err == nil {
		err = cerr
	}
	return err
}

// DeclareInbox implements bridge.Transport.
func (t *Transport) DeclareInbox(ctx context.Context, gid string, spec bridge.InboxSpec) error {
	groups := append([]string(nil), spec.Groups...)
	sort.Strings(groups)
	m := inboxMeta{Groups: groups, MaxLength: spec.MaxLength, MessageTTL: spec.MessageTTL}
	raw, _ := json.Marshal(m)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return bridge.ErrClosed
	}
	var seq uint64
	err := t.db.Update(func(tx *bolt.Tx) error {
		q := tx.Bucket(bktInbox).Bucket([]byte(gid))
		if q == nil {
			var err error
			if q, err = tx.Bucket(bktInbox).CreateBucket([]byte(gid)); err != nil {
				return err
			}
			// a name declared again numbers on from its last life (lazyack.go)
			if err := q.SetSequence(getFloor(tx.Bucket(bktFloor))); err != nil {
				return err
			}
		}
		seq = q.Sequence()
		return tx.Bucket(bktBind).Put([]byte(gid), raw)
	})
	if err != nil {
		return fmt.Errorf("embedded: declare inbox %s: %w", gid, err)
	}
	t.numberFrom(gid, seq)
	if ib := t.inboxes[gid]; ib != nil {
		ib.meta = m
		ib.groups = newInbox(gid, m).groups
		return nil
	}
	t.inboxes[gid] = newInbox(gid, m)
	return nil
}

// DeleteInbox implements bridge.Transport.
func (t *Transport) DeleteInbox(ctx context.Context, gid string) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return bridge.ErrClosed
	}
	ib := t.inboxes[gid]
	if ib == nil {
		t.mu.Unlock()
		return nil
	}
	delete(t.inboxes, gid)
	cons := ib.cons
	t.mu.Unlock()
	if cons != nil {
		cons.Cancel()
	}
	// no publish takes a sequence of it now; those that took one are
	// carried into the store before it goes (as they were committed
	// before it, without the journal)
	last := t.stopNumbering(gid)
	if err := t.flushJournals(); err != nil {
		// the store keeps the inbox, and the journal its messages, with
		// sequences past the store's: a re-declaration numbers after them
		t.numberFrom(gid, last)
		return fmt.Errorf("embedded: delete inbox %s: %w", gid, err)
	}
	err := t.db.Update(func(tx *bolt.Tx) error {
		if q := tx.Bucket(bktInbox).Bucket([]byte(gid)); q != nil {
			if err := raiseSeqFloor(tx, max(q.Sequence(), last)); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bktInbox).DeleteBucket([]byte(gid)); err != nil && !errors.Is(err, bolt.ErrBucketNotFound) {
			return err
		}
		if err := tx.Bucket(bktCount).Delete([]byte(gid)); err != nil {
			return err
		}
		return tx.Bucket(bktBind).Delete([]byte(gid))
	})
	if err != nil {
		t.numberFrom(gid, last) // a synchronous publish may still commit past the store's sequence
	}
	return err
}

func (t *Transport) route(key string) []*inbox {
	if ib := t.inboxes[key]; ib != nil {
		if ib.closed {
			return nil
		}
		return []*inbox{ib}
	}
	if !bridge.IsBroadcastKey(key) {
		return nil
	}
	var out []*inbox
	group := key[len("broadcast."):]
	for _, ib := range t.inboxes {
		if !ib.closed && (key == bridge.BroadcastAll || ib.groups[group]) {
			out = append(out, ib)
		}
	}
	return out
}

func seqKey(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

func getCount(b *bolt.Bucket, k []byte) uint64 {
	v := b.Get(k)
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

func putCount(b *bolt.Bucket, k []byte, n uint64) error {
	return b.Put(k, binary.BigEndian.AppendUint64(nil, n))
}

// Publish implements bridge.Transport.
func (t *Transport) Publish(ctx context.Context, key string, env *bridge.Envelope, mandatory bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := t.opts.Now()
	h, hb := splitHeaders(env.Headers())
	rec, err := json.Marshal(record{H: h, HB: hb, B: env.Body, At: now.UnixMilli(), K: key})
	if err != nil {
		return fmt.Errorf("embedded: encode %s: %w", env.MsgID, err)
	}
	targets, err := t.routeSnapshot(key)
	if err != nil {
		return err
	}
	defer t.published(targets)
	if len(targets) == 0 {
		if mandatory {
			return fmt.Errorf("%w: %s", bridge.ErrUnroutable, key)
		}
		return nil
	}
	a := t.accept(targets, key, rec, now)
	if err := t.makeDurable(a, targets, env); err != nil {
		return fmt.Errorf("embedded: publish %s: %w", env.MsgID, err)
	}
	if a.full {
		return fmt.Errorf("%w: %s holds %d messages", bridge.ErrInboxFull, bridge.InboxQueueName(key), targets[0].cap)
	}
	if a.stored == 0 && mandatory { // every target was deleted while we routed
		return fmt.Errorf("%w: %s", bridge.ErrUnroutable, key)
	}
	return nil
}

// routedInbox is an inbox a publish routes to, with its cap and how many
// of its messages the consumer holds unsettled, as they were when routed
// (the acked ones not yet committed are the index's: storedLocked).
type routedInbox struct {
	ib      *inbox
	cap     int
	unacked uint64
}

// routeSnapshot finds the inboxes bound to key. Snapshots under t.mu:
// ib.meta changes under it (DeclareInbox). As on the broker, only ready
// messages count towards MaxLength: those handed to the consumer and not
// yet settled do not.
func (t *Transport) routeSnapshot(key string) ([]routedInbox, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, bridge.ErrClosed
	}
	var out []routedInbox
	for _, ib := range t.route(key) {
		r := routedInbox{ib: ib, cap: ib.meta.MaxLength}
		if ib.cons != nil {
			r.unacked = uint64(ib.cons.outstanding())
		}
		ib.publishing++ // until published (CloseInbox waits for it)
		out = append(out, r)
	}
	return out, nil
}

func (t *Transport) putDead(tx *bolt.Tx, h map[string]any, body []byte, reason, queue string, now time.Time) error {
	h, hb := splitHeaders(h)
	raw, err := json.Marshal(deadRecord{H: h, HB: hb, B: body, Reason: reason, Queue: queue, At: now.UnixMilli()})
	if err != nil {
		return err
	}
	d := tx.Bucket(bktDLQ)
	seq, _ := d.NextSequence()
	if err := d.Put(seqKey(seq), raw); err != nil {
		return err
	}
	cnt := tx.Bucket(bktDLQCnt)
	n := getCount(cnt, []byte("n")) + 1
	for n > uint64(t.opts.DLQMax) {
		k, v := d.Cursor().First()
		if k == nil {
			break
		}
		var old deadRecord
		_ = json.Unmarshal(v, &old)
		t.log.Warn("dead-letter queue over its cap: oldest entry dropped", "cap", t.opts.DLQMax, bridge.LogMsgID, old.H[bridge.HdrMsgID], bridge.LogTraceID, old.H[bridge.HdrTraceID], "reason", old.Reason)
		if err := d.Delete(k); err != nil {
			return err
		}
		n--
	}
	return putCount(cnt, []byte("n"), n)
}

// Consume implements bridge.Transport.
func (t *Transport) Consume(ctx context.Context, gid string, prefetch int, h func(bridge.Delivery)) (bridge.Subscription, error) {
	if prefetch <= 0 {
		prefetch = 1
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, bridge.ErrClosed
	}
	ib := t.inboxes[gid]
	if ib == nil {
		return nil, fmt.Errorf("%w: %s", bridge.ErrNoInbox, gid)
	}
	if ib.cons != nil {
		return nil, fmt.Errorf("%w: %s", bridge.ErrConsumerExists, bridge.InboxQueueName(gid))
	}
	c := newConsumer(prefetch)
	ib.cons = c
	c.onCancel = func() {
		t.mu.Lock()
		if ib.cons == c {
			ib.cons = nil
		}
		t.mu.Unlock()
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		c.run(ctx, func() bool { return t.deliverInbox(ib, c, h) })
	}()
	return c, nil
}

// deliverInbox hands out what the prefetch window allows; reports whether
// it delivered anything (so the loop looks again at once).
func (t *Transport) deliverInbox(ib *inbox, c *consumer, h func(bridge.Delivery)) bool {
	t.mu.Lock()
	ttl := ib.meta.MessageTTL
	t.mu.Unlock()
	if ttl > 0 {
		// the backlog behind the prefetch window expires too (broker TTL)
		t.expire(ib.gid, c.cursor(), ttl)
	}
	room := c.room()
	if room <= 0 {
		return false
	}
	items := t.readInbox(ib.gid, c.cursor(), room)
	now := t.opts.Now()
	for _, it := range items {
		c.advance(it.seq)
		if it.acked {
			continue
		}
		a := &acker{t: t, ib: ib, gid: ib.gid, seq: it.seq, c: c}
		if it.bad != nil {
			t.log.Warn("undecodable record dead-lettered", "queue", bridge.InboxQueueName(ib.gid), "seq", it.seq, "err", it.bad)
			_ = a.Reject(bridge.ReasonRejected + ": undecodable record")
			continue
		}
		if ttl > 0 && now.Sub(time.UnixMilli(it.rec.At)) >= ttl {
			a.once.Do(func() { a.err = t.settleOrKeep(ib, it.seq, bridge.ReasonExpired, c) })
			continue
		}
		// undecodable headers go to the consumer too (Env nil, Err set),
		// which dead-letters and counts them
		env, err := bridge.FromHeaders(joinHeaders(it.rec.H, it.rec.HB), it.rec.B)
		id, _ := it.rec.H[bridge.HdrMsgID].(string)
		c.hold(it.seq)
		t.mu.Lock()
		redelivered := it.seq <= ib.loaded || ib.delivered[it.seq]
		ib.delivered[it.seq] = true
		t.mu.Unlock()
		h(bridge.Delivery{Env: env, Err: err, ID: id, Key: it.rec.K, Redelivered: redelivered, Acker: a})
	}
	return len(items) > 0
}

type acker struct {
	t    *Transport
	ib   *inbox // the inbox's life it was delivered from
	gid  string
	seq  uint64
	c    *consumer
	once sync.Once
	err  error
}

func (a *acker) Ack() error {
	a.once.Do(func() { a.err = a.t.lazyAck(a.ib, a.seq, a.c) })
	return a.err
}

// Reject dead-letters with reason "rejected", or "rejected: <reason>".
func (a *acker) Reject(reason string) error {
	switch {
	case reason == "" || reason == bridge.ReasonRejected:
		reason = bridge.ReasonRejected
	case !strings.HasPrefix(reason, bridge.ReasonRejected+": "):
		reason = bridge.ReasonRejected + ": " + reason
	}
	a.once.Do(func() { a.err = a.t.settleOrKeep(a.ib, a.seq, reason, a.c) })
	return a.err
}

// settle removes a message from its inbox, dead-lettering it when reason is
// set, and opens the consumer's prefetch window by one.
func (t *Transport) settle(gid string, seq uint64, reason string, c *consumer) error {
	dead := false
	err := t.write(func(tx *bolt.Tx) error {
		var err error
		dead, err = t.removeTx(tx, gid, seq, reason)
		return err
	})
	t.mu.Lock()
	if ib := t.inboxes[gid]; ib != nil && err == nil {
		delete(ib.delivered, seq)
	}
	t.mu.Unlock()
	c.release(seq)
	if dead {
		t.mu.Lock()
		if t.dlqCons != nil {
			t.dlqCons.poke()
		}
		t.mu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("embedded: settle %s/%d: %w", gid, seq, err)
	}
	return nil
}

// removeTx deletes message seq from gid's queue, dead-lettering it first
// when reason is set; reports whether it dead-lettered.
func (t *Transport) removeTx(tx *bolt.Tx, gid string, seq uint64, reason string) (bool, error) {
	q := tx.Bucket(bktInbox).Bucket([]byte(gid))
	if q == nil {
		return false, nil
	}
	v := q.Get(seqKey(seq))
	if v == nil {
		return false, nil // already settled (e.g. by an earlier consumer)
	}
	dead := false
	if reason != "" {
		var rec record
		if err := json.Unmarshal(v, &rec); err != nil {
			rec = record{H: map[string]any{}, B: v}
		}
		if err := t.putDead(tx, joinHeaders(rec.H, rec.HB), rec.B, reason, bridge.InboxQueueName(gid), t.opts.Now()); err != nil {
			return false, err
		}
		dead = true
	}
	if err := q.Delete(seqKey(seq)); err != nil {
		return false, err
	}
	cnt := tx.Bucket(bktCount)
	if n := getCount(cnt, []byte(gid)); n > 0 {
		return dead, putCount(cnt, []byte(gid), n-1)
	}
	return dead, nil
}

// sweepEvery is how often inboxes with no consumer are checked for messages
// past their MessageTTL.
const sweepEvery = 250 * time.Millisecond

// sweep is the TTL backstop for inboxes no consumer is attached to (a
// consumer expires its own backlog in deliverInbox).
func (t *Transport) sweep() {
	defer t.wg.Done()
	tick := time.NewTicker(sweepEvery)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
		}
		t.sweepOnce()
	}
}

// expire dead-letters with reason "expired" the messages of gid's queue
// after sequence after that are older than ttl, from the head up to the
// first younger one (as a broker's per-queue TTL does).
// Every delivery round calls it, and almost always nothing is due: that
// is found without t.mu (a read transaction, as deliveries read), so the
// rounds of a thousand inboxes do not queue on the transport's lock.
func (t *Transport) expire(gid string, after uint64, ttl time.Duration) {
	if !t.mayExpire(gid, after, ttl) {
		return
	}
	// expiry reads the store alone: what the journal holds goes there first
	if err := t.flushJournals(); err != nil {
		t.log.Warn("expiring messages postponed: the journals could not be committed", "queue", bridge.InboxQueueName(gid), "err", err)
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	if t.expireLocked(gid, after, ttl) > 0 && t.dlqCons != nil {
		t.dlqCons.poke()
	}
}

// mayExpire: the first message of gid's queue after sequence after is
// older than ttl (expireLocked then looks again under t.mu; a message
// older than ttl stays so).
func (t *Transport) mayExpire(gid string, after uint64, ttl time.Duration) bool {
	cutoff := t.opts.Now().Add(-ttl).UnixMilli()
	may := false
	_ = t.db.View(func(tx *bolt.Tx) error {
		q := tx.Bucket(bktInbox).Bucket([]byte(gid))
		if q == nil {
			return nil
		}
		if k, v := q.Cursor().Seek(seqKey(after + 1)); k != nil {
			var r struct {
				At int64 `json:"at"`
			}
			may = json.Unmarshal(v, &r) != nil || r.At <= cutoff
		}
		return nil
	})
	if may {
		return true
	}
	t.pmu.Lock()
	defer t.pmu.Unlock()
	at, ok := t.pend.head(gid, after)
	return ok && at <= cutoff
}

func (t *Transport) expireLocked(gid string, after uint64, ttl time.Duration) int {
	cutoff := t.opts.Now().Add(-ttl).UnixMilli()
	var due []uint64
	_ = t.db.View(func(tx *bolt.Tx) error {
		q := tx.Bucket(bktInbox).Bucket([]byte(gid))
		if q == nil {
			return nil
		}
		cur := q.Cursor()
		for k, v := cur.Seek(seqKey(after + 1)); k != nil; k, v = cur.Next() {
			var r struct {
				At int64 `json:"at"`
			}
			if json.Unmarshal(v, &r) == nil && r.At > cutoff {
				break
			}
			if seq := binary.BigEndian.Uint64(k); !t.pendingAck(gid, seq) {
				due = append(due, seq)
			}
		}
		return nil
	})
	if len(due) == 0 {
		return 0
	}
	n := 0
	err := t.db.Update(func(tx *bolt.Tx) error {
		n = 0
		for _, seq := range due {
			dead, err := t.removeTx(tx, gid, seq, bridge.ReasonExpired)
			if err != nil {
				return err
			}
			if dead {
				n++
			}
		}
		return nil
	})
	if err != nil {
		t.log.Warn("expiring messages failed", "queue", bridge.InboxQueueName(gid), "err", err)
		return 0
	}
	if ib := t.inboxes[gid]; ib != nil {
		for _, seq := range due {
			delete(ib.delivered, seq)
		}
	}
	return n
}

// ConsumeDeadLetters implements bridge.Transport.
func (t *Transport) ConsumeDeadLetters(ctx context.Context, h func(bridge.DeadLetter)) (bridge.Subscription, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, bridge.ErrClosed
	}
	if t.dlqCons != nil {
		return nil, fmt.Errorf("%w: bridge.dlq", bridge.ErrConsumerExists)
	}
	c := newConsumer(256)
	t.dlqCons = c
	c.onCancel = func() {
		t.mu.Lock()
		if t.dlqCons == c {
			t.dlqCons = nil
		}
		t.mu.Unlock()
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		c.run(ctx, func() bool { return t.deliverDead(c, h) })
	}()
	return c, nil
}

func (t *Transport) deliverDead(c *consumer, h func(bridge.DeadLetter)) bool {
	room := c.room()
	if room <= 0 {
		return false
	}
	type item struct {
		seq uint64
		rec deadRecord
	}
	var items []item
	_ = t.db.View(func(tx *bolt.Tx) error {
		cur := tx.Bucket(bktDLQ).Cursor()
		for k, v := cur.Seek(seqKey(c.cursor() + 1)); k != nil && len(items) < room; k, v = cur.Next() {
			it := item{seq: binary.BigEndian.Uint64(k)}
			if err := json.Unmarshal(v, &it.rec); err != nil {
				it.rec = deadRecord{Reason: "undecodable dead-letter record"}
			}
			items = append(items, it)
		}
		return nil
	})
	for _, it := range items {
		c.advance(it.seq)
		c.hold(it.seq)
		dl := bridge.DeadLetter{Reason: it.rec.Reason, Queue: it.rec.Queue, At: time.UnixMilli(it.rec.At), Acker: &dlqAcker{t: t, seq: it.seq, c: c}}
		if s, ok := it.rec.H[bridge.HdrMsgID].(string); ok {
			dl.MsgID = s
		}
		if env, err := bridge.FromHeaders(joinHeaders(it.rec.H, it.rec.HB), it.rec.B); err == nil {
			dl.Env = env
		}
		h(dl)
	}
	return len(items) > 0
}

type dlqAcker struct {
	t    *Transport
	seq  uint64
	c    *consumer
	once sync.Once
	err  error
}

func (a *dlqAcker) Ack() error {
	a.once.Do(func() {
		a.err = a.t.write(func(tx *bolt.Tx) error {
			d := tx.Bucket(bktDLQ)
			if d.Get(seqKey(a.seq)) == nil {
				return nil
			}
			if err := d.Delete(seqKey(a.seq)); err != nil {
				return err
			}
			cnt := tx.Bucket(bktDLQCnt)
			if n := getCount(cnt, []byte("n")); n > 0 {
				return putCount(cnt, []byte("n"), n-1)
			}
			return nil
		})
		a.c.release(a.seq)
	})
	return a.err
}

// Reject on a dead letter keeps it where it is (there is nowhere further).
func (a *dlqAcker) Reject(string) error { a.c.release(a.seq); return nil }

// Path is the store file.
func (t *Transport) Path() string { return t.path }

// Depth reports how many messages gid's inbox stores (delivered-unacked
// included). For metrics and tests.
func (t *Transport) Depth(gid string) int {
	t.snapMu.RLock()
	defer t.snapMu.RUnlock()
	var n, epoch uint64
	_ = t.db.View(func(tx *bolt.Tx) error {
		n, epoch = getCount(tx.Bucket(bktCount), []byte(gid)), getEpoch(tx)
		return nil
	})
	t.pmu.Lock()
	defer t.pmu.Unlock()
	return int(t.storedLocked(gid, n, epoch))
}

// Repair repairs the store at path if store.CheckFile finds it damaged
// (see store.RepairFile), then restores this store's invariants in the
// salvaged copy: messages whose record no longer decodes are dropped and
// reported, every binding has its queue, and the per-inbox and
// dead-letter counters match what is left.
func Repair(path string, now time.Time) (store.RepairResult, error) {
	return store.RepairFile(path, now, func(tx *bolt.Tx, r *store.RepairResult) error {
		for _, name := range [][]byte{bktInbox, bktBind, bktCount, bktDLQ, bktDLQCnt} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		inb, bind, cnt := tx.Bucket(bktInbox), tx.Bucket(bktBind), tx.Bucket(bktCount)
		var bound, unbound [][]byte
		if err := bind.ForEach(func(k, v []byte) error {
			var m inboxMeta
			if json.Unmarshal(v, &m) != nil {
				unbound = append(unbound, append([]byte(nil), k...))
			} else {
				bound = append(bound, append([]byte(nil), k...))
			}
			return nil
		}); err != nil {
			return err
		}
		for _, k := range unbound {
			r.Lost = append(r.Lost, fmt.Sprintf("binding of inbox %q: does not decode (its messages stay in the file, unbound)", k))
			if err := bind.Delete(k); err != nil {
				return err
			}
		}
		for _, k := range bound {
			if _, err := inb.CreateBucketIfNotExists(k); err != nil {
				return err
			}
		}
		var queues [][]byte
		if err := inb.ForEach(func(k, v []byte) error {
			if v == nil {
				queues = append(queues, append([]byte(nil), k...))
			}
			return nil
		}); err != nil {
			return err
		}
		for _, gid := range queues {
			if bind.Get(gid) == nil {
				raw, err := json.Marshal(inboxMeta{})
				if err == nil {
					err = bind.Put(gid, raw)
				}
				if err != nil {
					return err
				}
				r.Lost = append(r.Lost, fmt.Sprintf("binding of inbox %q: unreadable; bound again without groups (the gateway declares it again when its entity is registered)", gid))
			}
			q := inb.Bucket(gid)
			n, err := dropUndecodable(q, func(v []byte) bool { var rec record; return json.Unmarshal(v, &rec) == nil }, fmt.Sprintf("inbox %q", gid), r)
			if err != nil {
				return err
			}
			r.Kept[string(bktInbox)] -= n
			if err := putCount(cnt, gid, uint64(countKeys(q))); err != nil {
				return err
			}
		}
		dlq := tx.Bucket(bktDLQ)
		n, err := dropUndecodable(dlq, func(v []byte) bool { var d deadRecord; return json.Unmarshal(v, &d) == nil }, "dead-letter queue", r)
		if err != nil {
			return err
		}
		r.Kept[string(bktDLQ)] -= n
		return putCount(tx.Bucket(bktDLQCnt), []byte("n"), uint64(countKeys(dlq)))
	})
}

// dropUndecodable deletes the values of b that ok rejects and returns how
// many it deleted.
func dropUndecodable(b *bolt.Bucket, ok func([]byte) bool, what string, r *store.RepairResult) (int, error) {
	var bad [][]byte
	if err := b.ForEach(func(k, v []byte) error {
		if v != nil && !ok(v) {
			bad = append(bad, append([]byte(nil), k...))
		}
		return nil
	}); err != nil {
		return 0, err
	}
	for _, k := range bad {
		if err := b.Delete(k); err != nil {
			return 0, err
		}
	}
	if len(bad) > 0 {
		r.Lost = append(r.Lost, fmt.Sprintf("%s: %d message(s) whose record does not decode", what, len(bad)))
	}
	return len(bad), nil
}

// Inboxes lists the bound inboxes in the store at path and the messages
// each holds (for the repair report).
func Inboxes(path string) (map[string]int, error) {
	fi, err := store.CheckFile(path)
	if err != nil || fi.Missing {
		return nil, err
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 2 * time.Second})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	out := map[string]int{}
	err = db.View(func(tx *bolt.Tx) error {
		bind, inb := tx.Bucket(bktBind), tx.Bucket(bktInbox)
		if bind == nil || inb == nil {
			return nil
		}
		return bind.ForEach(func(k, _ []byte) error {
			if q := inb.Bucket(k); q != nil {
				out[string(k)] = countKeys(q)
			} else {
				out[string(k)] = 0
			}
			return nil
		})
	})
	return out, err
}

func countKeys(b *bolt.Bucket) int {
	n := 0
	_ = b.ForEach(func(_, v []byte) error {
		if v != nil {
			n++
		}
		return nil
	})
	return n
}

// Depths reports how many messages each inbox stores (delivered-unacked
// included), by gid, in one read: for metrics.
func (t *Transport) Depths() map[string]int {
	t.snapMu.RLock()
	defer t.snapMu.RUnlock()
	counts := map[string]uint64{}
	var epoch uint64
	_ = t.db.View(func(tx *bolt.Tx) error {
		epoch = getEpoch(tx)
		return tx.Bucket(bktCount).ForEach(func(k, v []byte) error {
			if len(v) == 8 {
				counts[string(k)] = binary.BigEndian.Uint64(v)
			}
			return nil
		})
	})
	t.pmu.Lock()
	defer t.pmu.Unlock()
	for gid := range t.pend.byGID {
		if _, ok := counts[gid]; !ok {
			counts[gid] = 0
		}
	}
	out := make(map[string]int, len(counts))
	for gid, n := range counts {
		out[gid] = int(t.storedLocked(gid, n, epoch))
	}
	return out
}
