package bridge_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/herdbridge/herdbridge/bridge"
)

var update = flag.Bool("update", false, "rewrite testdata/signing_input.{golden,json}")

var allKinds = []bridge.Kind{
	bridge.KindSend, bridge.KindReply, bridge.KindAsk, bridge.KindAnswer, bridge.KindTooLate,
	bridge.KindNoWaiter, bridge.KindAbandoned, bridge.KindFailed, bridge.KindInjected,
	bridge.KindBroadcast, bridge.KindPresence, bridge.KindSpawn, bridge.KindMissedAsk,
}

const (
	uMsg   = "7f0c2a8e-3b1d-4c5e-9a6f-0123456789ab"
	uTrace = "1e2d3c4b-5a69-4788-8796-a5b4c3d2e1f0"
	uFrom  = "a0a0a0a0-b1b1-4c2c-8d3d-e4e4e4e4e4e4"
	uTo    = "0f1e2d3c-4b5a-4697-8877-665544332211"
	uCorr  = "c0ffee00-1234-4abc-8def-0123456789ab"
	uTurn  = "deadbeef-0000-4111-8222-333344445555"
	uSpawn = "5ca1ab1e-7777-4888-9999-aaaabbbbcccc"
)

var (
	fixedTS = time.Date(2025, 6, 1, 12, 34, 56, 789_000_000, time.UTC)
	// a body with 2-, 3- and 4-byte UTF-8 sequences and a newline
	fixedBody = "Réponse : oui ✓ — 東京 🚀\nzweite Zeile «gut»"
)

// validEnvelope returns a well-formed envelope of kind, following the kind
// rules of Validate.
func validEnvelope(kind bridge.Kind) *bridge.Envelope {
	e := &bridge.Envelope{
		V: bridge.Version, Kind: kind, MsgID: uMsg, TraceID: uTrace, From: uFrom, To: uTo,
		Host: "host-a.example", TS: fixedTS, ExpiresAt: fixedTS.Add(45 * time.Second),
		Sig: bytes.Repeat([]byte{0xa5, 0x00, 0xff}, 21), Body: []byte(fixedBody),
	}
	switch kind {
	case bridge.KindBroadcast:
		e.To = bridge.BroadcastKey("team-a")
	case bridge.KindPresence:
		e.To = "roster.host-a.example"
	case bridge.KindSpawn:
		e.To = "host-b"
		e.SpawnID = uSpawn
	}
	switch kind {
	case bridge.KindInjected, bridge.KindFailed, bridge.KindNoWaiter, bridge.KindTooLate,
		bridge.KindAbandoned, bridge.KindAnswer, bridge.KindMissedAsk:
		e.Corr = uCorr
	}
	switch kind {
	case bridge.KindAsk, bridge.KindAnswer, bridge.KindTooLate, bridge.KindMissedAsk:
		e.TurnID = uTurn
	}
	return e
}

// diffEnvelope reports how two envelopes differ, or "".
func diffEnvelope(a, b *bridge.Envelope) string {
	var d []string
	chk := func(name string, x, y any) {
		if !reflect.DeepEqual(x, y) {
			d = append(d, name+": "+strconv.Quote(toString(x))+" != "+strconv.Quote(toString(y)))
		}
	}
	chk("v", a.V, b.V)
	chk("kind", a.Kind, b.Kind)
	chk("msgId", a.MsgID, b.MsgID)
	chk("traceId", a.TraceID, b.TraceID)
	chk("from", a.From, b.From)
	chk("to", a.To, b.To)
	chk("host", a.Host, b.Host)
	chk("corr", a.Corr, b.Corr)
	chk("turnId", a.TurnID, b.TurnID)
	chk("spawnId", a.SpawnID, b.SpawnID)
	if !a.TS.Equal(b.TS) {
		d = append(d, "ts: "+a.TS.String()+" != "+b.TS.String())
	}
	if !a.ExpiresAt.Equal(b.ExpiresAt) {
		d = append(d, "expiresAt: "+a.ExpiresAt.String()+" != "+b.ExpiresAt.String())
	}
	if !bytes.Equal(a.Sig, b.Sig) {
		d = append(d, "sig differs")
	}
	if !bytes.Equal(a.Body, b.Body) {
		d = append(d, "body differs")
	}
	return strings.Join(d, "; ")
}

func toString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case bridge.Kind:
		return string(x)
	case int:
		return strconv.Itoa(x)
	}
	return ""
}

func TestValidEnvelopes(t *testing.T) {
	for _, k := range allKinds {
		if err := validEnvelope(k).Validate(); err != nil {
			t.Errorf("%s: %v", k, err)
		}
	}
}

func TestHeadersRoundTrip(t *testing.T) {
	for _, k := range allKinds {
		t.Run(string(k), func(t *testing.T) {
			e := validEnvelope(k)
			h := e.Headers()
			for _, name := range []string{bridge.HdrV, bridge.HdrTS, bridge.HdrExpiresAt} {
				if _, ok := h[name].(int64); !ok {
					t.Errorf("header %s is %T, want int64 (AMQP tables keep it)", name, h[name])
				}
			}
			got, err := bridge.FromHeaders(h, e.Body)
			if err != nil {
				t.Fatalf("FromHeaders: %v", err)
			}
			if d := diffEnvelope(got, e); d != "" {
				t.Fatalf("round trip changed the envelope: %s", d)
			}
			if !reflect.DeepEqual(got.Headers(), h) {
				t.Errorf("headers after the round trip differ:\n%v\n%v", got.Headers(), h)
			}
			if !bytes.Equal(got.SigningInput(), e.SigningInput()) {
				t.Error("signing input changed in the round trip")
			}
			// Headers hands out its own copy of sig
			h[bridge.HdrSig].([]byte)[0] ^= 0xff
			if e.Sig[0] != 0xa5 {
				t.Error("Headers aliases the envelope's sig")
			}
		})
	}
}

// TestHeadersOtherWireTypes: headers as other decoders hand them over
// (AMQP's narrower integers and byte strings; JSON's float64 numbers) and
// headers this version does not know decode to the same envelope.
func TestHeadersOtherWireTypes(t *testing.T) {
	e := validEnvelope(bridge.KindAnswer)
	for name, mut := range map[string]func(map[string]any){
		"int32 v, float64 times": func(h map[string]any) {
			h[bridge.HdrV] = int32(1)
			h[bridge.HdrTS] = float64(e.TS.UnixMilli())
			h[bridge.HdrExpiresAt] = float64(e.ExpiresAt.UnixMilli())
		},
		"strings as bytes": func(h map[string]any) {
			for k, v := range h {
				if s, ok := v.(string); ok {
					h[k] = []byte(s)
				}
			}
		},
		"sig as string": func(h map[string]any) { h[bridge.HdrSig] = string(e.Sig) },
		"unknown headers": func(h map[string]any) {
			h["x-death"] = []any{map[string]any{"reason": "expired"}}
			h["futureField"] = int64(7)
		},
		"optional headers nil": func(h map[string]any) {
			h[bridge.HdrSpawnID] = nil
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := e.Headers()
			mut(h)
			got, err := bridge.FromHeaders(h, e.Body)
			if err != nil {
				t.Fatalf("FromHeaders: %v", err)
			}
			if d := diffEnvelope(got, e); d != "" {
				t.Fatalf("decoded envelope differs: %s", d)
			}
		})
	}
}

func TestFromHeadersMalformed(t *testing.T) {
	type mutation func(h map[string]any, body *[]byte)
	set := func(name string, v any) mutation {
		return func(h map[string]any, _ *[]byte) { h[name] = v }
	}
	del := func(name string) mutation {
		return func(h map[string]any, _ *[]byte) { delete(h, name) }
	}
	ts := fixedTS.UnixMilli()
	cases := []struct {
		name string
		kind bridge.Kind
		mut  mutation
	}{
		{"missing kind", bridge.KindSend, del(bridge.HdrKind)},
		{"missing v", bridge.KindSend, del(bridge.HdrV)},
		{"missing msgId", bridge.KindSend, del(bridge.HdrMsgID)},
		{"missing to", bridge.KindSend, del(bridge.HdrTo)},
		{"missing host", bridge.KindSend, del(bridge.HdrHost)},
		{"missing from", bridge.KindSend, del(bridge.HdrFrom)},
		{"missing ts", bridge.KindSend, del(bridge.HdrTS)},
		{"missing expiresAt", bridge.KindSend, del(bridge.HdrExpiresAt)},
		{"nil kind", bridge.KindSend, set(bridge.HdrKind, nil)},
		{"kind is an int", bridge.KindSend, set(bridge.HdrKind, int64(1))},
		{"unknown kind", bridge.KindSend, set(bridge.HdrKind, "SHOUT")},
		{"lower-case kind", bridge.KindSend, set(bridge.HdrKind, "send")},
		{"v is a string", bridge.KindSend, set(bridge.HdrV, "1")},
		{"v is a bool", bridge.KindSend, set(bridge.HdrV, true)},
		{"v is a fraction", bridge.KindSend, set(bridge.HdrV, 1.5)},
		{"unsupported v 2", bridge.KindSend, set(bridge.HdrV, int64(2))},
		{"unsupported v 0", bridge.KindSend, set(bridge.HdrV, int64(0))},
		{"negative v", bridge.KindSend, set(bridge.HdrV, int64(-1))},
		{"huge v", bridge.KindSend, set(bridge.HdrV, int64(1)<<40)},
		{"v is NaN", bridge.KindSend, set(bridge.HdrV, math.NaN())},
		{"ts is a string", bridge.KindSend, set(bridge.HdrTS, strconv.FormatInt(ts, 10))},
		{"ts is a time.Time", bridge.KindSend, set(bridge.HdrTS, fixedTS)},
		{"ts is a fraction", bridge.KindSend, set(bridge.HdrTS, float64(ts)+0.5)},
		{"ts zero", bridge.KindSend, set(bridge.HdrTS, int64(0))},
		{"ts negative", bridge.KindSend, set(bridge.HdrTS, int64(-5))},
		{"ts far future", bridge.KindSend, set(bridge.HdrTS, int64(1)<<50)},
		{"expiresAt is bytes", bridge.KindSend, set(bridge.HdrExpiresAt, []byte("1"))},
		{"expiresAt before ts", bridge.KindSend, set(bridge.HdrExpiresAt, ts-1)},
		{"msgId not a UUID", bridge.KindSend, set(bridge.HdrMsgID, "not-a-uuid")},
		{"msgId without dashes", bridge.KindSend, set(bridge.HdrMsgID, strings.ReplaceAll(uMsg, "-", ""))},
		{"msgId in braces", bridge.KindSend, set(bridge.HdrMsgID, "{"+uMsg+"}")},
		{"msgId urn", bridge.KindSend, set(bridge.HdrMsgID, "urn:uuid:"+uMsg)},
		{"msgId is an int", bridge.KindSend, set(bridge.HdrMsgID, int64(7))},
		{"traceId not a UUID", bridge.KindSend, set(bridge.HdrTraceID, "trace-1")},
		{"from not a gid", bridge.KindSend, set(bridge.HdrFrom, "alice")},
		{"from is a map", bridge.KindSend, set(bridge.HdrFrom, map[string]any{})},
		{"to not a gid", bridge.KindSend, set(bridge.HdrTo, "bob@host-b")},
		{"SEND to a broadcast key", bridge.KindSend, set(bridge.HdrTo, bridge.BroadcastAll)},
		{"corr not a UUID on SEND", bridge.KindSend, set(bridge.HdrCorr, "x")},
		{"host empty", bridge.KindSend, set(bridge.HdrHost, "")},
		{"host with a space", bridge.KindSend, set(bridge.HdrHost, "host a")},
		{"host starts with a dot", bridge.KindSend, set(bridge.HdrHost, ".host")},
		{"host too long", bridge.KindSend, set(bridge.HdrHost, strings.Repeat("h", 64))},
		{"header over 256 bytes", bridge.KindSend, set(bridge.HdrTraceID, strings.Repeat("a", 257))},
		{"header over 256 bytes as bytes", bridge.KindSend, set(bridge.HdrTraceID, bytes.Repeat([]byte("a"), 257))},
		{"sig is an int", bridge.KindSend, set(bridge.HdrSig, int64(3))},
		{"sig too long", bridge.KindSend, set(bridge.HdrSig, make([]byte, 513))},
		{"oversized body", bridge.KindSend, func(_ map[string]any, b *[]byte) {
			*b = bytes.Repeat([]byte("a"), bridge.MaxBodyBytes+1)
		}},
		{"non-UTF-8 body", bridge.KindSend, func(_ map[string]any, b *[]byte) { *b = []byte("caf\xe9") }},
		{"truncated UTF-8 body", bridge.KindSend, func(_ map[string]any, b *[]byte) { *b = []byte("🚀")[:3] }},
		{"turnId not UTF-8", bridge.KindSend, set(bridge.HdrTurnID, "turn\xff")},
		{"broadcast to a gid", bridge.KindBroadcast, set(bridge.HdrTo, uTo)},
		{"broadcast to broadcast.", bridge.KindBroadcast, set(bridge.HdrTo, "broadcast.")},
		{"broadcast to upper-case group", bridge.KindBroadcast, set(bridge.HdrTo, "broadcast.Team")},
		{"broadcast to a nested key", bridge.KindBroadcast, set(bridge.HdrTo, "broadcast.all.x")},
		{"broadcast to a wildcard", bridge.KindBroadcast, set(bridge.HdrTo, "broadcast.#")},
		{"ANSWER without corr", bridge.KindAnswer, del(bridge.HdrCorr)},
		{"ANSWER with bad corr", bridge.KindAnswer, set(bridge.HdrCorr, "c")},
		{"ANSWER without turnId", bridge.KindAnswer, del(bridge.HdrTurnID)},
		{"ASK without turnId", bridge.KindAsk, del(bridge.HdrTurnID)},
		{"ASK with bad turnId", bridge.KindAsk, set(bridge.HdrTurnID, "t-1")},
		{"TOO_LATE without turnId", bridge.KindTooLate, del(bridge.HdrTurnID)},
		{"INJECTED without corr", bridge.KindInjected, del(bridge.HdrCorr)},
		{"FAILED without corr", bridge.KindFailed, del(bridge.HdrCorr)},
		{"NO_WAITER without corr", bridge.KindNoWaiter, del(bridge.HdrCorr)},
		{"ABANDONED without corr", bridge.KindAbandoned, del(bridge.HdrCorr)},
		{"MISSED_ASK without corr", bridge.KindMissedAsk, del(bridge.HdrCorr)},
		{"MISSED_ASK without turnId", bridge.KindMissedAsk, del(bridge.HdrTurnID)},
		{"SPAWN without spawnId", bridge.KindSpawn, del(bridge.HdrSpawnID)},
		{"SPAWN with bad spawnId", bridge.KindSpawn, set(bridge.HdrSpawnID, "s-1")},
		{"SPAWN from not a gid", bridge.KindSpawn, set(bridge.HdrFrom, "gateway")},
		{"PRESENCE to too long", bridge.KindPresence, set(bridge.HdrTo, strings.Repeat("r", 129))},
		{"PRESENCE from not UTF-8", bridge.KindPresence, set(bridge.HdrFrom, "\xc3\x28")},
		{"PRESENCE to not UTF-8", bridge.KindPresence, set(bridge.HdrTo, "roster.\xff")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base := validEnvelope(c.kind)
			h, body := base.Headers(), base.Body
			c.mut(h, &body)
			e, err := bridge.FromHeaders(h, body)
			if !errors.Is(err, bridge.ErrMalformed) {
				t.Fatalf("err = %v, want ErrMalformed", err)
			}
			if e != nil {
				t.Errorf("malformed headers returned an envelope too")
			}
		})
	}
}

func TestBroadcastKeys(t *testing.T) {
	for key, want := range map[string]bool{
		"broadcast.all": true, "broadcast.team-a": true, "broadcast.t_1": true,
		"broadcast.": false, "broadcast.All": false, "broadcast.a.b": false, "broadcast.#": false,
		"broadcast.-x": false, "broadcast": false, uTo: false, "": false,
		"broadcast." + strings.Repeat("a", 63): true, "broadcast." + strings.Repeat("a", 64): false,
	} {
		if got := bridge.IsBroadcastKey(key); got != want {
			t.Errorf("IsBroadcastKey(%q) = %v, want %v", key, got, want)
		}
	}
	for g, want := range map[string]string{"": bridge.BroadcastAll, "all": bridge.BroadcastAll, "ops": "broadcast.ops"} {
		if got := bridge.BroadcastKey(g); got != want {
			t.Errorf("BroadcastKey(%q) = %q, want %q", g, got, want)
		}
	}
	if bridge.ValidGroup("all") {
		t.Error(`"all" must not be a group name: it is every inbox`)
	}
}

func TestExpired(t *testing.T) {
	e := validEnvelope(bridge.KindSend)
	if e.Expired(e.ExpiresAt.Add(-time.Millisecond)) {
		t.Error("expired before expiresAt")
	}
	if !e.Expired(e.ExpiresAt) {
		t.Error("not expired at expiresAt")
	}
}

// --- the signing-input golden vector ---

const (
	goldenPath = "../testdata/signing_input.golden"
	vectorPath = "../testdata/signing_input.json"
)

// signingFieldOrder is the documented order of SigningInput.
var signingFieldOrder = []string{
	bridge.HdrV, bridge.HdrKind, bridge.HdrMsgID, bridge.HdrTraceID, bridge.HdrFrom, bridge.HdrTo,
	bridge.HdrHost, bridge.HdrCorr, bridge.HdrTurnID, bridge.HdrSpawnID, bridge.HdrTS, bridge.HdrExpiresAt,
}

// vector is testdata/signing_input.json: the golden envelope spelled out
// for a second implementation.
type vector struct {
	Comment  string   `json:"comment"`
	Encoding []string `json:"encoding"`
	Domain   string   `json:"domain"`
	Envelope struct {
		V            int    `json:"v"`
		Kind         string `json:"kind"`
		MsgID        string `json:"msgId"`
		TraceID      string `json:"traceId"`
		From         string `json:"from"`
		To           string `json:"to"`
		Host         string `json:"host"`
		Corr         string `json:"corr"`
		TurnID       string `json:"turnId"`
		SpawnID      string `json:"spawnId"`
		TS           int64  `json:"ts"`
		ExpiresAt    int64  `json:"expiresAt"`
		TSText       string `json:"tsRFC3339"`
		ExpiresText  string `json:"expiresAtRFC3339"`
		Body         string `json:"body"`
		BodyHex      string `json:"bodyHex"`
		BodyLenBytes int    `json:"bodyLenBytes"`
	} `json:"envelope"`
	FieldOrder         []string `json:"fieldOrder"`
	SigningInputLen    int      `json:"signingInputLen"`
	SigningInputHex    string   `json:"signingInputHex"`
	SigningInputSHA256 string   `json:"signingInputSha256"`
}

// goldenEnvelope is the envelope of the vector: an ANSWER (corr and turnId
// set, spawnId empty, so an empty field is in the vector too).
func goldenEnvelope() *bridge.Envelope {
	e := validEnvelope(bridge.KindAnswer)
	e.Sig = nil // not part of the input
	return e
}

// encodeByHand builds the signing input from its documented definition,
// independently of SigningInput: domain, NUL, each field as a 4-byte
// big-endian length and its bytes, then the body as an 8-byte big-endian
// length and its bytes.
func encodeByHand(domain string, fields []string, body []byte) []byte {
	var b bytes.Buffer
	b.WriteString(domain)
	b.WriteByte(0)
	for _, f := range fields {
		_ = binary.Write(&b, binary.BigEndian, uint32(len(f)))
		b.WriteString(f)
	}
	_ = binary.Write(&b, binary.BigEndian, uint64(len(body)))
	b.Write(body)
	return b.Bytes()
}

func makeVector(e *bridge.Envelope) vector {
	var v vector
	v.Comment = "Golden vector of bridge.Envelope.SigningInput (SPEC §3): the exact bytes a gateway signs with Ed25519. " +
		"Rebuild signingInputHex from envelope and encoding; it must match byte for byte. testdata/signing_input.golden is the same hex."
	v.Encoding = []string{
		"domain (ASCII) || 0x00",
		"then for each name in fieldOrder: uint32 big-endian byte length || the field's UTF-8 bytes (an absent field is the empty string, length 0)",
		"v, ts and expiresAt are decimal ASCII integers; ts and expiresAt are Unix milliseconds",
		"then uint64 big-endian byte length of the body || the exact body bytes",
		"sig is not part of the input; nothing is JSON-encoded or canonicalized",
	}
	v.Domain = bridge.SigningDomain
	v.Envelope.V = e.V
	v.Envelope.Kind = string(e.Kind)
	v.Envelope.MsgID = e.MsgID
	v.Envelope.TraceID = e.TraceID
	v.Envelope.From = e.From
	v.Envelope.To = e.To
	v.Envelope.Host = e.Host
	v.Envelope.Corr = e.Corr
	v.Envelope.TurnID = e.TurnID
	v.Envelope.SpawnID = e.SpawnID
	v.Envelope.TS = e.TS.UnixMilli()
	v.Envelope.ExpiresAt = e.ExpiresAt.UnixMilli()
	v.Envelope.TSText = e.TS.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	v.Envelope.ExpiresText = e.ExpiresAt.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	v.Envelope.Body = string(e.Body)
	v.Envelope.BodyHex = hex.EncodeToString(e.Body)
	v.Envelope.BodyLenBytes = len(e.Body)
	v.FieldOrder = signingFieldOrder
	in := e.SigningInput()
	sum := sha256.Sum256(in)
	v.SigningInputLen = len(in)
	v.SigningInputHex = hex.EncodeToString(in)
	v.SigningInputSHA256 = hex.EncodeToString(sum[:])
	return v
}

func (v vector) envelope(t *testing.T) *bridge.Envelope {
	t.Helper()
	body, err := hex.DecodeString(v.Envelope.BodyHex)
	if err != nil {
		t.Fatalf("bodyHex: %v", err)
	}
	if string(body) != v.Envelope.Body || len(body) != v.Envelope.BodyLenBytes {
		t.Fatal("vector: body, bodyHex and bodyLenBytes disagree")
	}
	return &bridge.Envelope{
		V: v.Envelope.V, Kind: bridge.Kind(v.Envelope.Kind), MsgID: v.Envelope.MsgID,
		TraceID: v.Envelope.TraceID, From: v.Envelope.From, To: v.Envelope.To, Host: v.Envelope.Host,
		Corr: v.Envelope.Corr, TurnID: v.Envelope.TurnID, SpawnID: v.Envelope.SpawnID,
		TS: time.UnixMilli(v.Envelope.TS), ExpiresAt: time.UnixMilli(v.Envelope.ExpiresAt), Body: body,
	}
}

func TestSigningInputGolden(t *testing.T) {
	e := goldenEnvelope()
	if err := e.Validate(); err != nil {
		t.Fatal(err)
	}
	in := e.SigningInput()

	// the implementation agrees with the documented definition
	fields := []string{
		strconv.Itoa(e.V), string(e.Kind), e.MsgID, e.TraceID, e.From, e.To, e.Host,
		e.Corr, e.TurnID, e.SpawnID,
		strconv.FormatInt(e.TS.UnixMilli(), 10), strconv.FormatInt(e.ExpiresAt.UnixMilli(), 10),
	}
	if want := encodeByHand(bridge.SigningDomain, fields, e.Body); !bytes.Equal(in, want) {
		t.Fatalf("SigningInput does not follow its definition:\n got  %x\n want %x", in, want)
	}
	if bridge.SigningDomain != "herdbridge/envelope/v1" {
		t.Errorf("SigningDomain changed to %q: every signature changes with it", bridge.SigningDomain)
	}

	v := makeVector(e)
	if *update {
		if err := os.MkdirAll(filepath.Dir(goldenPath), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenPath, []byte(v.SigningInputHex+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(vectorPath, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s and %s", goldenPath, vectorPath)
	}

	golden, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatalf("%v (run go test ./bridge -run TestSigningInputGolden -update to create it)", err)
	}
	if got, want := hex.EncodeToString(in), strings.TrimSpace(string(golden)); got != want {
		t.Fatalf("SigningInput changed: every signature in the field breaks.\n got  %s\n want %s\n"+
			"(if the change is intended, bump SigningDomain and run with -update)", got, want)
	}

	// the JSON vector describes the same envelope and the same bytes
	raw, err := os.ReadFile(vectorPath)
	if err != nil {
		t.Fatal(err)
	}
	var fileV vector
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fileV); err != nil {
		t.Fatalf("%s: %v", vectorPath, err)
	}
	if !reflect.DeepEqual(fileV, v) {
		t.Fatalf("%s is stale: run with -update", vectorPath)
	}
	fe := fileV.envelope(t)
	if d := diffEnvelope(fe, e); d != "" {
		t.Fatalf("%s describes another envelope: %s", vectorPath, d)
	}
	if !reflect.DeepEqual(fileV.FieldOrder, signingFieldOrder) {
		t.Fatalf("fieldOrder = %v", fileV.FieldOrder)
	}
	var fv []string
	for _, name := range fileV.FieldOrder {
		switch name {
		case bridge.HdrV:
			fv = append(fv, strconv.Itoa(fileV.Envelope.V))
		case bridge.HdrTS:
			fv = append(fv, strconv.FormatInt(fileV.Envelope.TS, 10))
		case bridge.HdrExpiresAt:
			fv = append(fv, strconv.FormatInt(fileV.Envelope.ExpiresAt, 10))
		default:
			fv = append(fv, fieldByName(fe, name))
		}
	}
	byHand := encodeByHand(fileV.Domain, fv, fe.Body)
	if hex.EncodeToString(byHand) != fileV.SigningInputHex || len(byHand) != fileV.SigningInputLen {
		t.Fatal("the JSON vector's own fields do not rebuild its signingInputHex")
	}
	if sum := sha256.Sum256(byHand); hex.EncodeToString(sum[:]) != fileV.SigningInputSHA256 {
		t.Fatal("signingInputSha256 does not match")
	}
}

func fieldByName(e *bridge.Envelope, name string) string {
	return map[string]string{
		bridge.HdrKind: string(e.Kind), bridge.HdrMsgID: e.MsgID, bridge.HdrTraceID: e.TraceID,
		bridge.HdrFrom: e.From, bridge.HdrTo: e.To, bridge.HdrHost: e.Host, bridge.HdrCorr: e.Corr,
		bridge.HdrTurnID: e.TurnID, bridge.HdrSpawnID: e.SpawnID,
	}[name]
}

// TestSigningInputSeparatesFields: moving bytes between adjacent fields, or
// between the last field and the body, changes the input (the length
// prefixes are what makes the encoding unambiguous).
func TestSigningInputSeparatesFields(t *testing.T) {
	a := goldenEnvelope()
	b := goldenEnvelope()
	b.TraceID, b.From = "", a.TraceID+a.From
	if bytes.Equal(a.SigningInput(), b.SigningInput()) {
		t.Error("traceId|from and |traceId+from encode alike")
	}
	c := goldenEnvelope()
	c.SpawnID, c.Body = "x", append([]byte(nil), c.Body[1:]...)
	if bytes.Equal(a.SigningInput(), c.SigningInput()) {
		t.Error("shifting bytes into a field from the body is invisible")
	}
	d := goldenEnvelope()
	d.Sig = []byte("any")
	if !bytes.Equal(a.SigningInput(), d.SigningInput()) {
		t.Error("sig must not be part of the signing input")
	}
}

func TestClone(t *testing.T) {
	e := validEnvelope(bridge.KindSend)
	c := e.Clone()
	if d := diffEnvelope(c, e); d != "" {
		t.Fatal(d)
	}
	c.Body[0] ^= 0xff
	c.Sig[0] ^= 0xff
	if e.Body[0] == c.Body[0] || e.Sig[0] == c.Sig[0] {
		t.Error("Clone shares body or sig with the original")
	}
}

// --- fuzzing ---

// fuzzHeaders builds a header map from fuzzed parts: present selects which
// headers exist (bit i: header i of hdrOrder), form how they are typed.
var hdrOrder = []string{
	bridge.HdrV, bridge.HdrKind, bridge.HdrMsgID, bridge.HdrTraceID, bridge.HdrFrom, bridge.HdrTo,
	bridge.HdrHost, bridge.HdrCorr, bridge.HdrTurnID, bridge.HdrSpawnID, bridge.HdrTS,
	bridge.HdrExpiresAt, bridge.HdrSig,
}

func fuzzHeaders(v int64, strs [9]string, ts, exp int64, sig []byte, present uint16, form uint8) map[string]any {
	h := map[string]any{}
	num := func(n int64) any {
		switch form & 3 {
		case 1:
			return float64(n)
		case 2:
			return int32(n)
		case 3:
			return uint16(n)
		}
		return n
	}
	str := func(s string) any {
		if form&4 != 0 {
			return []byte(s)
		}
		return s
	}
	vals := []any{num(v)}
	for _, s := range strs {
		vals = append(vals, str(s))
	}
	vals = append(vals, num(ts), num(exp))
	if form&8 != 0 {
		vals = append(vals, string(sig))
	} else {
		vals = append(vals, sig)
	}
	for i, name := range hdrOrder {
		if present&(1<<i) != 0 {
			h[name] = vals[i]
		}
	}
	if form&16 != 0 {
		h["x-unknown"] = str(strs[0])
	}
	if form&32 != 0 && present&1 != 0 {
		h[bridge.HdrV] = strs[0] // a wrong type
	}
	return h
}

func FuzzFromHeaders(f *testing.F) {
	for i, k := range allKinds {
		e := validEnvelope(k)
		strs := [9]string{string(e.Kind), e.MsgID, e.TraceID, e.From, e.To, e.Host, e.Corr, e.TurnID, e.SpawnID}
		f.Add(int64(e.V), strs[0], strs[1], strs[2], strs[3], strs[4], strs[5], strs[6], strs[7], strs[8],
			e.TS.UnixMilli(), e.ExpiresAt.UnixMilli(), e.Sig, e.Body, uint16(0xffff), uint8(i%32))
	}
	e := validEnvelope(bridge.KindPresence)
	f.Add(int64(1), "PRESENCE", uMsg, "", "", "roster.h", "h", "", "", "",
		int64(1), int64(1), []byte(nil), []byte(nil), uint16(0xffff), uint8(0))
	f.Add(int64(1), "SEND", uMsg, uTrace, uFrom, uTo, "h", "", "", "",
		e.TS.UnixMilli(), e.TS.UnixMilli()-1, []byte{}, []byte("\xff"), uint16(0x1fff), uint8(4))

	f.Fuzz(func(t *testing.T, v int64, kind, msgID, traceID, from, to, host, corr, turnID, spawnID string,
		ts, exp int64, sig, body []byte, present uint16, form uint8) {
		h := fuzzHeaders(v, [9]string{kind, msgID, traceID, from, to, host, corr, turnID, spawnID}, ts, exp, sig, present, form)
		env, err := bridge.FromHeaders(h, body)
		if err != nil {
			if !errors.Is(err, bridge.ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			if env != nil {
				t.Fatal("an error and an envelope")
			}
			return
		}
		if err := env.Validate(); err != nil {
			t.Fatalf("accepted envelope does not validate: %v", err)
		}
		h2 := env.Headers()
		for name, val := range h2 {
			// text stays text through any store or wire that keeps headers as strings
			if s, ok := val.(string); ok && !utf8.ValidString(s) {
				t.Fatalf("accepted header %s is not UTF-8: %q", name, s)
			}
		}
		env2, err := bridge.FromHeaders(h2, env.Body)
		if err != nil {
			t.Fatalf("re-encoded envelope refused: %v\nheaders %v", err, h2)
		}
		if d := diffEnvelope(env2, env); d != "" {
			t.Fatalf("re-decode differs: %s", d)
		}
		if h3 := env2.Headers(); !reflect.DeepEqual(h3, h2) {
			t.Fatalf("headers not stable:\n%v\n%v", h2, h3)
		}
		in := env.SigningInput()
		if !bytes.Equal(in, env.SigningInput()) || !bytes.Equal(in, env2.SigningInput()) || !bytes.Equal(in, env.Clone().SigningInput()) {
			t.Fatal("SigningInput is not deterministic")
		}
	})
}
