package bridge

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Version is the envelope schema version this build writes and accepts.
const Version = 1

// MaxBodyBytes bounds an envelope body on the wire. Tool arguments are held
// to the (smaller, configurable) gateway limit before an envelope is built.
const MaxBodyBytes = 1 << 20

// Kind is what an envelope is for (SPEC §3).
type Kind string

// The kinds of SPEC §3.
const (
	KindSend      Kind = "SEND"
	KindReply     Kind = "REPLY"
	KindAsk       Kind = "ASK"
	KindAnswer    Kind = "ANSWER"
	KindTooLate   Kind = "TOO_LATE"
	KindNoWaiter  Kind = "NO_WAITER"
	KindAbandoned Kind = "ABANDONED"
	KindFailed    Kind = "FAILED"
	KindInjected  Kind = "INJECTED"
	KindBroadcast Kind = "BROADCAST"
	KindPresence  Kind = "PRESENCE"
	KindSpawn     Kind = "SPAWN"
	// KindStop and KindInterrupt are lifecycle control (bridge/stop.go,
	// bridge/interrupt.go): to control.<host>, like SPAWN, their body says
	// which worker.
	KindStop      Kind = "STOP"
	KindInterrupt Kind = "INTERRUPT"
	// KindMissedAsk is the notice a gateway leaves in its own entity's
	// inbox for an ASK it answered NO_WAITER (SPEC §10, bridge/missedask.go).
	KindMissedAsk Kind = "MISSED_ASK"
	// KindTrace asks another host's gateway for the hops of a traceId or
	// msgId in its audit log (control.<host>); KindTraceAnswer is its
	// answer, corr the TRACE, on the asker's control queue (trace.go).
	// Both go from gateway to gateway: metadata only, never a body.
	KindTrace       Kind = "TRACE"
	KindTraceAnswer Kind = "TRACE_ANSWER"
	// KindDeadLetter is the notice a gateway that consumed another host's
	// dead letter sends to that host's control queue, carrying the original
	// signed envelope (corr = its msgId): the sender's gateway checks its own
	// signature and reports it (deadnotice.go).
	KindDeadLetter Kind = "DEAD_LETTER"
	// KindGiveUp is a sender's gateway asking a worker's gateway to give
	// up a brief whose receipt is overdue (control.<host>, corr = the
	// brief): the worker's gateway decides — FAILED if it never queued the
	// brief (and it never will), nothing if it did (its receipt follows).
	// From gateway to gateway (giveup.go).
	KindGiveUp Kind = "GIVE_UP"
	// KindPresenceAsk is a gateway asking another host's gateway for its
	// presence snapshot (control.<host>), sent when that host's digest or
	// deltas do not add up here; KindPresenceSnapshot is one page of the
	// answer, on the asker's control queue (presencesync.go). From
	// gateway to gateway.
	KindPresenceAsk      Kind = "PRESENCE_ASK"
	KindPresenceSnapshot Kind = "PRESENCE_SNAPSHOT"
)

var kinds = map[Kind]bool{
	KindSend: true, KindReply: true, KindAsk: true, KindAnswer: true, KindTooLate: true,
	KindNoWaiter: true, KindAbandoned: true, KindFailed: true, KindInjected: true,
	KindBroadcast: true, KindPresence: true, KindSpawn: true, KindMissedAsk: true,
	KindStop: true, KindInterrupt: true,
	KindTrace: true, KindTraceAnswer: true, KindDeadLetter: true, KindGiveUp: true,
	KindPresenceAsk: true, KindPresenceSnapshot: true,
}

// controlKinds are the kinds addressed to a host's control queue.
var controlKinds = map[Kind]bool{KindSpawn: true, KindStop: true, KindInterrupt: true, KindDeadLetter: true, KindGiveUp: true}

// Known reports whether k is one of the kinds of SPEC §3 (a refused
// message may carry any string as its kind).
func (k Kind) Known() bool { return kinds[k] }

// needsCorr lists the kinds that answer another message and so must name it.
var needsCorr = map[Kind]bool{
	KindInjected: true, KindFailed: true, KindNoWaiter: true, KindTooLate: true,
	KindAbandoned: true, KindAnswer: true, KindMissedAsk: true, KindTraceAnswer: true, KindDeadLetter: true, KindGiveUp: true,
}

// needsTurn lists the kinds that belong to an ASK/ANSWER conversation.
var needsTurn = map[Kind]bool{KindAsk: true, KindAnswer: true, KindTooLate: true, KindMissedAsk: true}

// Envelope is one message on the fabric: the header fields of SPEC §3 and
// the opaque body. Times are carried with millisecond precision.
type Envelope struct {
	V       int
	Kind    Kind
	MsgID   string
	TraceID string
	From    string // gid of the sending entity
	To      string // gid of the recipient, or broadcast.<group>
	Host    string // host id of the publishing gateway
	Corr    string // msgId this one answers
	TurnID  string
	SpawnID string
	// Priority is PriorityNext for a SEND that jumps its worker's pane
	// queue, else "". Signed only when set (SigningInput), so every
	// envelope without it signs as before.
	Priority string
	// Seal names the scheme the body is sealed with (SealScheme) and
	// SealKey the recipient host's HPKE key id; both "" for a clear body.
	// Signed only when set, like Priority (envelope_seal.go).
	Seal, SealKey string
	TS            time.Time
	ExpiresAt     time.Time
	Sig           []byte
	Body          []byte
}

// Header names on the wire (AMQP headers; the embedded store uses the same).
const (
	HdrV         = "v"
	HdrKind      = "kind"
	HdrMsgID     = "msgId"
	HdrTraceID   = "traceId"
	HdrFrom      = "from"
	HdrTo        = "to"
	HdrHost      = "host"
	HdrCorr      = "corr"
	HdrTurnID    = "turnId"
	HdrSpawnID   = "spawnId"
	HdrPriority  = "priority"
	HdrTS        = "ts"
	HdrExpiresAt = "expiresAt"
	HdrSig       = "sig"
	HdrSeal      = "seal"
	HdrSealKey   = "sealKey"
)

// BroadcastAll is the routing key every inbox is bound to.
const BroadcastAll = "broadcast.all"

// BroadcastKey is the routing key of a group (or of everyone when group is "").
func BroadcastKey(group string) string {
	if group == "" || group == "all" {
		return BroadcastAll
	}
	return "broadcast." + group
}

var (
	groupRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	hostRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
)

// ValidGroup reports whether g can be a group name (and so a routing key part).
func ValidGroup(g string) bool { return groupRE.MatchString(g) && g != "all" }

// ValidHost reports whether h can be a host id.
func ValidHost(h string) bool { return hostRE.MatchString(h) }

// IsBroadcastKey reports whether key is broadcast.all or broadcast.<group>.
func IsBroadcastKey(key string) bool {
	if key == BroadcastAll {
		return true
	}
	const p = "broadcast."
	return len(key) > len(p) && key[:len(p)] == p && ValidGroup(key[len(p):])
}

// ErrMalformed wraps every reason an envelope is refused as not well-formed.
var ErrMalformed = errors.New("bridge: malformed envelope")

// Refinements of ErrMalformed (errors.Is matches both), so a receiver can
// count them apart.
var (
	ErrUnsupportedVersion = fmt.Errorf("%w: unsupported version", ErrMalformed)
	ErrOversized          = fmt.Errorf("%w: body too large", ErrMalformed)
)

func malformed(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, a...))
}

func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	_, err := uuid.Parse(s)
	return err == nil
}

// Validate checks that e is well-formed for its kind. It does not check the
// signature, the sender's presence or expiry: those need the receiver's state.
func (e *Envelope) Validate() error {
	if e.V != Version {
		return fmt.Errorf("%w: v %d (this gateway speaks v%d)", ErrUnsupportedVersion, e.V, Version)
	}
	if !kinds[e.Kind] {
		return malformed("unknown kind %q", e.Kind)
	}
	// fields not held to a UUID or a pattern below must still be text: a
	// store that keeps headers as JSON would otherwise rewrite them (and so
	// break the signature)
	for _, f := range [...]struct{ name, v string }{{HdrFrom, e.From}, {HdrTo, e.To}, {HdrTurnID, e.TurnID}, {HdrSpawnID, e.SpawnID}} {
		if !utf8.ValidString(f.v) {
			return malformed("%s is not UTF-8", f.name)
		}
	}
	if !isUUID(e.MsgID) {
		return malformed("msgId %q is not a UUID", e.MsgID)
	}
	if e.TraceID != "" && !isUUID(e.TraceID) {
		return malformed("traceId %q is not a UUID", e.TraceID)
	}
	if !ValidHost(e.Host) {
		return malformed("host %q is not a host id", e.Host)
	}
	if e.Kind != KindPresence && !isUUID(e.From) {
		return malformed("from %q is not a gid", e.From)
	}
	switch {
	case e.Kind == KindBroadcast:
		if !IsBroadcastKey(e.To) {
			return malformed("broadcast to %q is not broadcast.<group>", e.To)
		}
	case e.Kind == KindPresence || controlKinds[e.Kind] || e.Kind == KindTrace || e.Kind == KindPresenceAsk:
		// addressed to a host or the roster, not to an entity inbox
		if len(e.To) > 128 {
			return malformed("to too long")
		}
	default:
		if !isUUID(e.To) {
			return malformed("to %q is not a gid", e.To)
		}
	}
	if needsCorr[e.Kind] && !isUUID(e.Corr) {
		return malformed("%s needs corr, got %q", e.Kind, e.Corr)
	}
	if !needsCorr[e.Kind] && e.Corr != "" && !isUUID(e.Corr) {
		return malformed("corr %q is not a UUID", e.Corr)
	}
	if needsTurn[e.Kind] && !isUUID(e.TurnID) {
		return malformed("%s needs turnId, got %q", e.Kind, e.TurnID)
	}
	if e.Kind == KindSpawn && !isUUID(e.SpawnID) {
		return malformed("SPAWN needs spawnId, got %q", e.SpawnID)
	}
	if e.Priority != "" && (e.Priority != PriorityNext || e.Kind != KindSend) {
		return malformed("priority %q on a %s (only a SEND may be %q)", e.Priority, e.Kind, PriorityNext)
	}
	if err := e.validateSeal(); err != nil {
		return err
	}
	if e.TS.IsZero() || e.ExpiresAt.IsZero() {
		return malformed("ts and expiresAt are required")
	}
	if e.ExpiresAt.Before(e.TS) {
		return malformed("expiresAt before ts")
	}
	if len(e.Body) > MaxBodyBytes {
		return fmt.Errorf("%w: %d bytes, over %d", ErrOversized, len(e.Body), MaxBodyBytes)
	}
	if !utf8.Valid(e.Body) {
		return malformed("body is not UTF-8")
	}
	if len(e.Sig) > 512 {
		return malformed("sig too long")
	}
	return nil
}

// Expired reports whether e is past its expiresAt at now.
func (e *Envelope) Expired(now time.Time) bool { return !now.Before(e.ExpiresAt) }

// Headers returns the wire headers of e. Integers are int64 so an AMQP table
// carries them unchanged.
func (e *Envelope) Headers() map[string]any {
	h := map[string]any{
		HdrV:         int64(e.V),
		HdrKind:      string(e.Kind),
		HdrMsgID:     e.MsgID,
		HdrFrom:      e.From,
		HdrTo:        e.To,
		HdrHost:      e.Host,
		HdrTS:        e.TS.UnixMilli(),
		HdrExpiresAt: e.ExpiresAt.UnixMilli(),
	}
	for k, v := range map[string]string{HdrTraceID: e.TraceID, HdrCorr: e.Corr, HdrTurnID: e.TurnID, HdrSpawnID: e.SpawnID, HdrPriority: e.Priority,
		HdrSeal: e.Seal, HdrSealKey: e.SealKey} {
		if v != "" {
			h[k] = v
		}
	}
	if len(e.Sig) > 0 {
		h[HdrSig] = append([]byte(nil), e.Sig...)
	}
	return h
}

// FromHeaders decodes an envelope from untrusted wire headers and body and
// validates it. Unknown header names are ignored (forward compatibility);
// a known header of the wrong type is an error.
func FromHeaders(h map[string]any, body []byte) (*Envelope, error) {
	r := headerReader{h: h}
	v := r.num(HdrV)
	if r.err == nil && (v < 0 || v > math.MaxInt32) {
		r.err = malformed("v %d out of range", v)
	}
	if r.err == nil && v != Version { // a later version may change every other header: judge nothing else
		return nil, fmt.Errorf("%w: v %d (this gateway speaks v%d)", ErrUnsupportedVersion, v, Version)
	}
	if r.err == nil && len(body) > MaxBodyBytes {
		return nil, fmt.Errorf("%w: %d bytes, over %d", ErrOversized, len(body), MaxBodyBytes)
	}
	e := &Envelope{V: int(v), Body: body}
	e.Kind = Kind(r.str(HdrKind, true))
	e.MsgID = r.str(HdrMsgID, true)
	e.TraceID = r.str(HdrTraceID, false)
	e.From = r.str(HdrFrom, false)
	e.To = r.str(HdrTo, true)
	e.Host = r.str(HdrHost, true)
	e.Corr = r.str(HdrCorr, false)
	e.TurnID = r.str(HdrTurnID, false)
	e.SpawnID = r.str(HdrSpawnID, false)
	e.Priority = r.str(HdrPriority, false)
	e.Seal = r.str(HdrSeal, false)
	e.SealKey = r.str(HdrSealKey, false)
	ts := r.num(HdrTS)
	exp := r.num(HdrExpiresAt)
	if r.err != nil {
		return nil, r.err
	}
	const maxMS = 1 << 46 // year ~4200; keeps time arithmetic far from overflow
	if ts <= 0 || ts > maxMS || exp <= 0 || exp > maxMS {
		return nil, malformed("ts/expiresAt out of range")
	}
	e.TS = time.UnixMilli(ts)
	e.ExpiresAt = time.UnixMilli(exp)
	sig, err := sigHeader(h)
	if err != nil {
		return nil, err
	}
	e.Sig = sig
	if err := e.Validate(); err != nil {
		return nil, err
	}
	return e, nil
}

// headerReader reads typed headers; the first error sticks and later reads
// return zero values.
type headerReader struct {
	h   map[string]any
	err error
}

func (r *headerReader) str(name string, required bool) string {
	if r.err != nil {
		return ""
	}
	v, ok := r.h[name]
	if !ok || v == nil {
		if required {
			r.err = malformed("missing header %q", name)
		}
		return ""
	}
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case []byte:
		s = string(x)
	default:
		r.err = malformed("header %q is %T, want string", name, v)
		return ""
	}
	if len(s) > 256 {
		r.err = malformed("header %q too long", name)
		return ""
	}
	return s
}

func (r *headerReader) num(name string) int64 {
	if r.err != nil {
		return 0
	}
	v, ok := r.h[name]
	if !ok || v == nil {
		r.err = malformed("missing header %q", name)
		return 0
	}
	n, ok := toInt64(v)
	if !ok {
		r.err = malformed("header %q is %T, want integer", name, v)
	}
	return n
}

// sigHeader reads the optional signature (bytes; a string is taken as its bytes).
func sigHeader(h map[string]any) ([]byte, error) {
	s, ok := h[HdrSig]
	if !ok || s == nil {
		return nil, nil
	}
	switch b := s.(type) {
	case []byte:
		return append([]byte(nil), b...), nil
	case string:
		return []byte(b), nil
	}
	return nil, malformed("header %q is %T, want bytes", HdrSig, s)
}

func toInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int8:
		return int64(n), true
	case int16:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case uint8:
		return int64(n), true
	case uint16:
		return int64(n), true
	case uint32:
		return int64(n), true
	case float64: // JSON-decoded headers (the embedded store)
		if n != math.Trunc(n) || math.Abs(n) > 1<<53 {
			return 0, false
		}
		return int64(n), true
	default:
		return 0, false
	}
}

// SigningDomain separates herdbridge envelope signatures from any other use
// of a host key.
const SigningDomain = "herdbridge/envelope/v1"

// SigningInput returns the exact bytes a gateway signs for e: the domain and
// a NUL, then each header of the fixed list below as a 4-byte big-endian
// length and its bytes, then the body as an 8-byte big-endian length and its
// bytes. Integers (v, ts, expiresAt in Unix milliseconds) are decimal ASCII.
// No JSON, no map order, nothing left to canonicalize. A set priority is
// one more field after expiresAt, its name and value ("priority=next"):
// an envelope without one signs exactly as before the header existed, and
// the two cannot be confused (without it, the body length would have to
// begin with the bytes 00 00 00 0d "prio": over 50 GiB).
func (e *Envelope) SigningInput() []byte {
	fields := []string{
		strconv.Itoa(e.V), string(e.Kind), e.MsgID, e.TraceID, e.From, e.To, e.Host,
		e.Corr, e.TurnID, e.SpawnID,
		strconv.FormatInt(e.TS.UnixMilli(), 10), strconv.FormatInt(e.ExpiresAt.UnixMilli(), 10),
	}
	if e.Priority != "" {
		fields = append(fields, HdrPriority+"="+e.Priority)
	}
	if e.Seal != "" { // after priority, both named: neither can pass for the other
		fields = append(fields, HdrSeal+"="+e.Seal, HdrSealKey+"="+e.SealKey)
	}
	n := len(SigningDomain) + 1 + 8 + len(e.Body)
	for _, f := range fields {
		n += 4 + len(f)
	}
	b := make([]byte, 0, n)
	b = append(b, SigningDomain...)
	b = append(b, 0)
	for _, f := range fields {
		b = binary.BigEndian.AppendUint32(b, uint32(len(f)))
		b = append(b, f...)
	}
	b = binary.BigEndian.AppendUint64(b, uint64(len(e.Body)))
	return append(b, e.Body...)
}

// Clone returns a deep copy of e.
func (e *Envelope) Clone() *Envelope {
	c := *e
	c.Sig = append([]byte(nil), e.Sig...)
	c.Body = append([]byte(nil), e.Body...)
	return &c
}
