package pairing

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/herdbridge/herdbridge/keys"
)

// Message types, in the order they travel.
const (
	TypeHello   = "hello"   // joiner → initiator: its host, key and share
	TypeReply   = "reply"   // initiator → joiner: its host, key, share and confirmation
	TypeConfirm = "confirm" // joiner → initiator: the joiner's confirmation
	TypeAbort   = "abort"   // joiner → initiator: the initiator's confirmation did not verify
	TypeDone    = "done"    // initiator → joiner: the joiner's key is pinned
)

// Wire sizes.
const (
	// version 2 is CPace as draft-irtf-cfrg-cpace-21 (pairing v1 was an
	// earlier construction of its own): the two derive different keys, so
	// a message of another version is refused by name (ErrVersion).
	version = 2
	sidLen  = 16
	tagLen  = 32
	// MaxMessage bounds what ParseMessage reads: a reply, the largest
	// message, is ~350 bytes.
	MaxMessage = 4 << 10
)

// wireMessage is a pairing message as JSON; []byte fields are base64.
type wireMessage struct {
	V     int    `json:"v"`
	Type  string `json:"t"`
	SID   []byte `json:"sid"`
	Host  string `json:"host,omitempty"`
	Key   string `json:"key,omitempty"` // "ssh-ed25519 AAAA…"
	Share []byte `json:"share,omitempty"`
	Tag   []byte `json:"tag,omitempty"`
}

// Message is a parsed, checked pairing message.
type Message struct {
	Type  string
	SID   []byte // the joiner's session id: names its queue and the attempt
	Host  string // hello, reply: the sender's host id
	Key   ed25519.PublicKey
	Share []byte // hello, reply: the sender's CPace share
	Tag   []byte // reply, confirm, done: key confirmation
}

// Marshal encodes m for the wire.
func (m *Message) Marshal() []byte {
	w := wireMessage{V: version, Type: m.Type, SID: m.SID, Host: m.Host, Share: m.Share, Tag: m.Tag}
	if m.Key != nil {
		w.Key = keys.FormatPublicKey(m.Key)
	}
	b, err := json.Marshal(w)
	if err != nil {
		panic(err) // only strings and byte slices: cannot fail
	}
	return b
}

// ParseMessage decodes and checks a pairing message from the broker, which
// anyone with access to the broker may have sent. It never panics; it
// refuses unknown fields and types, a wrong version, fields of the wrong
// size and fields a type does not carry.
func ParseMessage(data []byte) (*Message, error) {
	if len(data) > MaxMessage {
		return nil, fmt.Errorf("pairing: message of %d bytes, over %d", len(data), MaxMessage)
	}
	var w wireMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return nil, fmt.Errorf("pairing: message does not decode: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("pairing: message has data after its JSON object")
	}
	if w.V != version {
		return nil, versionErr(w.V)
	}
	if len(w.SID) != sidLen {
		return nil, fmt.Errorf("pairing: session id of %d bytes, want %d", len(w.SID), sidLen)
	}
	m := &Message{Type: w.Type, SID: w.SID, Share: w.Share, Tag: w.Tag, Host: w.Host}
	if err := m.checkFields(w.Key); err != nil {
		return nil, err
	}
	return m, nil
}

// checkFields checks which fields m's type carries and parses the key.
func (m *Message) checkFields(key string) error {
	var party, share, tag bool // what the type carries
	switch m.Type {
	case TypeHello:
		party, share = true, true
	case TypeReply:
		party, share, tag = true, true, true
	case TypeConfirm, TypeDone:
		tag = true
	case TypeAbort:
	default:
		return fmt.Errorf("pairing: unknown message type %.20q", m.Type)
	}
	if !party && (m.Host != "" || key != "") || !share && m.Share != nil || !tag && m.Tag != nil {
		return fmt.Errorf("pairing: %s message carries fields it must not", m.Type)
	}
	if share && len(m.Share) != shareLen {
		return fmt.Errorf("pairing: %s share of %d bytes, want %d", m.Type, len(m.Share), shareLen)
	}
	if tag && len(m.Tag) != tagLen {
		return fmt.Errorf("pairing: %s tag of %d bytes, want %d", m.Type, len(m.Tag), tagLen)
	}
	if !party {
		return nil
	}
	if err := keys.CheckHost(m.Host); err != nil {
		return fmt.Errorf("pairing: %s: %w", m.Type, err)
	}
	k, err := keys.ParsePublicKey(key)
	if err != nil {
		return fmt.Errorf("pairing: %s: %w", m.Type, err)
	}
	m.Key = k
	return nil
}

// transcript is the draft's transcript_ir with the joiner as party A:
// each share followed by its party's associated data, the host id and key
// it asks the other to pin. The session id and the nameplate are bound in
// already (sessionKey, channelID).
func transcript(joiner, initiator *Message) []byte {
	return transcriptIR(joiner.Share, associatedData(joiner), initiator.Share, associatedData(initiator))
}

// associatedData is CPace's AD of a party: its host id and public key.
func associatedData(p *Message) []byte { return lvCat([]byte(p.Host), p.Key) }
