package pairing

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/keys"
)

// party is one host of a test: its id, key and trust file.
type party struct {
	host  string
	pub   ed25519.PublicKey
	trust string
}

func newParty(t *testing.T, host string) party {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return party{host: host, pub: pub, trust: filepath.Join(t.TempDir(), keys.TrustFile)}
}

func (p party) opts() Options {
	return Options{Host: p.host, Key: p.pub, TrustFile: p.trust, StepWait: 10 * time.Second}
}

// trusted is the trust file of p as host → keys (absent: empty).
func (p party) trusted(t *testing.T) map[string][]ed25519.PublicKey {
	t.Helper()
	m, err := keys.ReadTrust(p.trust)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (p party) mustTrust(t *testing.T, q party) {
	t.Helper()
	ks := p.trusted(t)[q.host]
	if len(ks) != 1 || !ks[0].Equal(q.pub) {
		t.Fatalf("%s trusts %s with %d keys, want exactly its key", p.host, q.host, len(ks))
	}
}

func (p party) mustTrustNothing(t *testing.T) {
	t.Helper()
	if m := p.trusted(t); len(m) != 0 {
		t.Fatalf("%s pinned %d hosts, want none", p.host, len(m))
	}
}

type waited struct {
	res Result
	err error
}

// listen opens an offer for a and waits on it in the background.
func listen(t *testing.T, rv Rendezvous, o Options) (*Offer, <-chan waited) {
	t.Helper()
	offer, err := Listen(context.Background(), rv, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { offer.Close() })
	ch := make(chan waited, 1)
	go func() { r, err := offer.Wait(context.Background()); ch <- waited{r, err} }()
	return offer, ch
}

// wrong returns c with one secret character changed.
func wrong(c Code) Code {
	b := []byte(c)
	i := CodeLen - 1
	b[i] = alphabet[(strings.IndexByte(alphabet, b[i])+1)%len(alphabet)]
	return Code(b)
}

func TestPairPinsBothKeysAndNeverSendsTheSecret(t *testing.T) {
	rv := newMem()
	tap := rv.tap()
	a, b := newParty(t, "hostA"), newParty(t, "hostB")
	offer, waitA := listen(t, rv, a.opts())
	res, err := Join(context.Background(), rv, offer.Code(), b.opts())
	if err != nil {
		t.Fatalf("join: %v", err)
	}
	if res.Peer != "hostA" || !res.PeerKey.Equal(a.pub) {
		t.Fatalf("joiner paired with %q", res.Peer)
	}
	w := <-waitA
	if w.err != nil || w.res.Peer != "hostB" || w.res.Failures != 0 {
		t.Fatalf("initiator: %+v, %v", w.res, w.err)
	}
	a.mustTrust(t, b)
	b.mustTrust(t, a)

	secret := string(offer.Code())[NameplateLen:]
	n := 0
	for len(tap) > 0 {
		m := <-tap
		n++
		if bytes.Contains(bytes.ToUpper(m.msg), []byte(secret)) || strings.Contains(m.to, secret) {
			t.Fatalf("the code's secret %q travelled: to %s: %s", secret, m.to, m.msg)
		}
	}
	if n != 4 {
		t.Fatalf("%d messages on the wire, want 4 (hello, reply, confirm, done)", n)
	}

	// the code works once: the offer is gone
	c := newParty(t, "hostC")
	if _, err := Join(context.Background(), rv, offer.Code(), c.opts()); !errors.Is(err, nil) && !strings.Contains(err.Error(), "no pairing waits") {
		t.Fatalf("second join with a used code: %v", err)
	} else if err == nil {
		t.Fatal("a used code paired again")
	}
	c.mustTrustNothing(t)
}

func TestWrongCodeRefusedCountedNothingPinned(t *testing.T) {
	rv := newMem()
	a, b := newParty(t, "hostA"), newParty(t, "hostB")
	offer, waitA := listen(t, rv, a.opts())
	_, err := Join(context.Background(), rv, wrong(offer.Code()), b.opts())
	if !errors.Is(err, ErrWrongCode) {
		t.Fatalf("join with a wrong code: %v, want ErrWrongCode", err)
	}
	b.mustTrustNothing(t)
	a.mustTrustNothing(t)
	// the right code still pairs, and the wrong attempt was counted
	if _, err := Join(context.Background(), rv, offer.Code(), b.opts()); err != nil {
		t.Fatalf("join with the right code after a wrong one: %v", err)
	}
	w := <-waitA
	if w.err != nil || w.res.Failures != 1 {
		t.Fatalf("initiator: %+v, %v; want paired after 1 failure", w.res, w.err)
	}
	a.mustTrust(t, b)
	b.mustTrust(t, a)
}

func TestInitiatorGivesUpAfterMaxFailures(t *testing.T) {
	rv := newMem()
	a, b := newParty(t, "hostA"), newParty(t, "hostB")
	o := a.opts()
	o.MaxFailures = 2
	offer, waitA := listen(t, rv, o)
	for i := range 2 {
		if _, err := Join(context.Background(), rv, wrong(offer.Code()), b.opts()); !errors.Is(err, ErrWrongCode) {
			t.Fatalf("wrong join %d: %v", i, err)
		}
	}
	w := <-waitA
	if !errors.Is(w.err, ErrTooManyTries) || w.res.Failures != 2 {
		t.Fatalf("initiator: %+v, %v; want ErrTooManyTries after 2", w.res, w.err)
	}
	offer.Close()
	if _, err := Join(context.Background(), rv, offer.Code(), b.opts()); err == nil {
		t.Fatal("the right code paired after the initiator gave up")
	}
	a.mustTrustNothing(t)
	b.mustTrustNothing(t)
}

func TestReplayedHelloRefusedAndCounted(t *testing.T) {
	rv := newMem()
	tap := rv.tap()
	a, b := newParty(t, "hostA"), newParty(t, "hostB")
	offer, waitA := listen(t, rv, a.opts())
	if _, err := Join(context.Background(), rv, wrong(offer.Code()), b.opts()); !errors.Is(err, ErrWrongCode) {
		t.Fatal(err)
	}
	var hello []byte
	for len(tap) > 0 {
		if m := <-tap; m.to == InitiatorAddr(offer.Code()) && bytes.Contains(m.msg, []byte(`"t":"hello"`)) {
			hello = m.msg
		}
	}
	// an onlooker replays the hello it saw, from a room of its own
	eve, err := rv.Open(context.Background(), "pair.eve")
	if err != nil {
		t.Fatal(err)
	}
	if err := eve.Send(context.Background(), InitiatorAddr(offer.Code()), hello, time.Minute); err != nil {
		t.Fatal(err)
	}
	// and a confirm no attempt waits for
	sid := make([]byte, sidLen)
	stray := (&Message{Type: TypeConfirm, SID: sid, Tag: make([]byte, tagLen)}).Marshal()
	if err := eve.Send(context.Background(), InitiatorAddr(offer.Code()), stray, time.Minute); err != nil {
		t.Fatal(err)
	}
	w := <-waitA
	if !errors.Is(w.err, ErrTooManyTries) || w.res.Failures != 3 || !errors.Is(w.err, ErrTooManyTries) {
		t.Fatalf("initiator: %+v, %v; want 3 failures (wrong code, replayed hello, stray confirm)", w.res, w.err)
	}
	if !strings.Contains(w.err.Error(), "out-of-turn") {
		t.Fatalf("last refusal %v, want a replay", w.err)
	}
	a.mustTrustNothing(t)
	b.mustTrustNothing(t)
}

// mitm rewrites messages in flight with f.
type mitm struct {
	*memRendezvous
	f func(to string, msg []byte) []byte
}

func (m mitm) Open(ctx context.Context, addr string) (Room, error) {
	r, err := m.memRendezvous.Open(ctx, addr)
	if err != nil {
		return nil, err
	}
	return mitmRoom{r, m.f}, nil
}

type mitmRoom struct {
	Room
	f func(to string, msg []byte) []byte
}

func (r mitmRoom) Send(ctx context.Context, to string, msg []byte, ttl time.Duration) error {
	return r.Room.Send(ctx, to, r.f(to, msg), ttl)
}

func TestSwappedKeyRefused(t *testing.T) {
	mallory := newParty(t, "hostB")
	for _, typ := range []string{TypeHello, TypeReply} {
		t.Run(typ, func(t *testing.T) {
			rv := mitm{newMem(), func(_ string, msg []byte) []byte {
				var w map[string]any
				if json.Unmarshal(msg, &w) != nil || w["t"] != typ {
					return msg
				}
				w["key"] = keys.FormatPublicKey(mallory.pub)
				b, _ := json.Marshal(w)
				return b
			}}
			a, b := newParty(t, "hostA"), newParty(t, "hostB")
			offer, waitA := listen(t, rv, a.opts())
			if _, err := Join(context.Background(), rv, offer.Code(), b.opts()); !errors.Is(err, ErrWrongCode) {
				t.Fatalf("join through a key swap: %v, want refused", err)
			}
			offer.Close()
			<-waitA
			a.mustTrustNothing(t)
			b.mustTrustNothing(t)
		})
	}
}

func TestCodeExpires(t *testing.T) {
	a := newParty(t, "hostA")
	o := a.opts()
	o.Expires = 20 * time.Millisecond
	_, waitA := listen(t, newMem(), o)
	if w := <-waitA; !errors.Is(w.err, ErrExpired) {
		t.Fatalf("unanswered offer: %v, want ErrExpired", w.err)
	}
}

func TestSameHostIDRefused(t *testing.T) {
	rv := newMem()
	a, b := newParty(t, "same"), newParty(t, "same")
	offer, _ := listen(t, rv, a.opts())
	if _, err := Join(context.Background(), rv, offer.Code(), b.opts()); err == nil || !strings.Contains(err.Error(), "host") {
		t.Fatalf("pairing two hosts with one id: %v", err)
	}
	a.mustTrustNothing(t)
	b.mustTrustNothing(t)
}

func TestParseCode(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"ABCD-EFGH", "ABCDEFGH"},
		{"abcd efgh", "ABCDEFGH"},
		{"0o1i-lL23", "00111123"},
		{" 7KQM-4XJ9 ", "7KQM4XJ9"},
	} {
		got, err := ParseCode(tc.in)
		if err != nil || string(got) != tc.want {
			t.Errorf("ParseCode(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "ABCD-EFG", "ABCD-EFGHJ", "ABCD-EFGU", "ABCD-EFG!", "ÄBCD-EFGH", strings.Repeat("A", 100)} {
		if _, err := ParseCode(bad); err == nil {
			t.Errorf("ParseCode(%q) accepted", bad)
		}
	}
	for range 100 {
		c, err := NewCode()
		if err != nil {
			t.Fatal(err)
		}
		if back, err := ParseCode(c.String()); err != nil || back != c {
			t.Fatalf("%s does not parse back: %q %v", c, back, err)
		}
	}
}

func TestParseMessageRefuses(t *testing.T) {
	p := newParty(t, "hostA")
	sid := make([]byte, sidLen)
	share := make([]byte, shareLen)
	good := (&Message{Type: TypeHello, SID: sid, Host: "hostA", Key: p.pub, Share: share}).Marshal()
	if m, err := ParseMessage(good); err != nil || m.Host != "hostA" || !m.Key.Equal(p.pub) {
		t.Fatalf("good hello: %v", err)
	}
	for name, raw := range map[string]string{
		"unknown field":  `{"v":2,"t":"abort","sid":"AAAAAAAAAAAAAAAAAAAAAA==","x":1}`,
		"version":        `{"v":1,"t":"abort","sid":"AAAAAAAAAAAAAAAAAAAAAA=="}`,
		"type":           `{"v":2,"t":"nope","sid":"AAAAAAAAAAAAAAAAAAAAAA=="}`,
		"short sid":      `{"v":2,"t":"abort","sid":"AAAA"}`,
		"abort with tag": `{"v":2,"t":"abort","sid":"AAAAAAAAAAAAAAAAAAAAAA==","tag":"AAAA"}`,
		"confirm no tag": `{"v":2,"t":"confirm","sid":"AAAAAAAAAAAAAAAAAAAAAA=="}`,
		"hello no key":   `{"v":2,"t":"hello","sid":"AAAAAAAAAAAAAAAAAAAAAA==","host":"h","share":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}`,
		"trailing data":  `{"v":2,"t":"abort","sid":"AAAAAAAAAAAAAAAAAAAAAA=="} {}`,
		"not json":       `hello`,
		"oversized":      `{"v":2,"t":"abort","sid":"AAAAAAAAAAAAAAAAAAAAAA==","host":"` + strings.Repeat("a", MaxMessage) + `"}`,
	} {
		if _, err := ParseMessage([]byte(raw)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestBadShareRefused(t *testing.T) {
	s, err := newShare("ABCDEFGH", make([]byte, sidLen))
	if err != nil {
		t.Fatal(err)
	}
	identity := make([]byte, shareLen) // ristretto255's identity encodes as 32 zero bytes
	nonCanonical := bytes.Repeat([]byte{0xff}, shareLen)
	for name, peer := range map[string][]byte{"identity": identity, "non-canonical": nonCanonical, "short": {1, 2}} {
		if _, err := s.secret(peer); !errors.Is(err, errBadShare) {
			t.Errorf("%s share: %v, want errBadShare", name, err)
		}
	}
}

func TestMain(m *testing.M) { os.Exit(m.Run()) }

// TestReplayedReplyRefusedByJoiner: an onlooker who recorded the reply of
// one pairing and answers a later joiner of the same code with it (as if
// it were the initiator) is refused: the reply belongs to another session.
func TestReplayedReplyRefusedByJoiner(t *testing.T) {
	rv := newMem()
	tap := rv.tap()
	a, b := newParty(t, "hostA"), newParty(t, "hostB")
	offer, waitA := listen(t, rv, a.opts())
	if _, err := Join(context.Background(), rv, offer.Code(), b.opts()); err != nil {
		t.Fatal(err)
	}
	<-waitA
	var reply []byte
	for len(tap) > 0 {
		if m := <-tap; bytes.Contains(m.msg, []byte(`"t":"reply"`)) {
			reply = m.msg
		}
	}
	// the onlooker takes the code's address once the initiator left
	eve, err := rv.Open(context.Background(), InitiatorAddr(offer.Code()))
	if err != nil {
		t.Fatal(err)
	}
	defer eve.Close()
	c := newParty(t, "hostC")
	joined := make(chan error, 1)
	go func() { _, err := Join(context.Background(), rv, offer.Code(), c.opts()); joined <- err }()
	raw, err := eve.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	hello, err := ParseMessage(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := eve.Send(context.Background(), joinerAddr(offer.Code(), hello.SID), reply, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := <-joined; !errors.Is(err, ErrReplay) {
		t.Fatalf("joiner answered with a recorded reply: %v, want ErrReplay", err)
	}
	c.mustTrustNothing(t)
}
