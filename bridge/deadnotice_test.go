package bridge_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

func noticeJSON(t testing.TB, reason string, e *bridge.Envelope) []byte {
	t.Helper()
	raw, err := json.Marshal(bridge.NoticeOf(bridge.DeadLetter{Reason: reason, Queue: "agent." + e.To + ".inbox.v2", At: fixedTS}, e))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestDeadLetterNoticeRoundTrip: the envelope a DEAD_LETTER carries comes
// back with every signed field, its signature and its body byte for byte
// (so its sender's gateway can check its own signature), whatever the body
// holds; a notice that does not decode or carries an invalid envelope is
// malformed.
func TestDeadLetterNoticeRoundTrip(t *testing.T) {
	e := validEnvelope(bridge.KindReply)
	e.Body = []byte("quotes \" <tags> & \x01 control, é, 😀")
	n, got, err := bridge.ParseDeadLetterNotice(noticeJSON(t, bridge.ReasonExpired, e))
	if err != nil {
		t.Fatal(err)
	}
	if n.Reason != bridge.ReasonExpired || n.At != fixedTS.UnixMilli() {
		t.Errorf("notice %+v", n)
	}
	if !bytes.Equal(got.SigningInput(), e.SigningInput()) || !bytes.Equal(got.Sig, e.Sig) {
		t.Errorf("envelope changed on the way:\n got %+v\nwant %+v", got, e)
	}
	bad := validEnvelope(bridge.KindReply)
	bad.MsgID = "not-a-uuid"
	for name, raw := range map[string][]byte{
		"not JSON":          []byte("{"),
		"no reason":         noticeJSON(t, "", e),
		"invalid envelope":  noticeJSON(t, bridge.ReasonExpired, bad),
		"no times":          []byte(`{"reason":"expired","envelope":{"v":1}}`),
		"body not UTF-8":    bytes.Replace(noticeJSON(t, bridge.ReasonExpired, e), []byte(`"body":"`), []byte(`"body":"/w`), 1),
		"sig of wrong type": bytes.Replace(noticeJSON(t, bridge.ReasonExpired, e), []byte(`"sig":"`), []byte(`"sig":7,"x":"`), 1),
	} {
		if _, env, err := bridge.ParseDeadLetterNotice(raw); !errors.Is(err, bridge.ErrMalformed) || env != nil {
			t.Errorf("%s: env %v, err %v, want ErrMalformed", name, env, err)
		}
	}
}

// FuzzParseDeadLetterNotice: any DEAD_LETTER body (another gateway wrote
// it) either is malformed or carries a valid envelope that survives
// another round trip unchanged.
func FuzzParseDeadLetterNotice(f *testing.F) {
	for _, k := range []bridge.Kind{bridge.KindSend, bridge.KindReply, bridge.KindAsk, bridge.KindAnswer} {
		f.Add(noticeJSON(f, bridge.ReasonExpired, validEnvelope(k)))
	}
	f.Add([]byte(`{"reason":"expired","envelope":{"v":1,"ts":1,"expiresAt":1}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		n, env, err := bridge.ParseDeadLetterNotice(raw)
		if err != nil {
			if !errors.Is(err, bridge.ErrMalformed) || env != nil {
				t.Fatalf("env %v, err %v: want ErrMalformed and no envelope", env, err)
			}
			return
		}
		if err := env.Validate(); err != nil {
			t.Fatalf("accepted an invalid envelope: %v", err)
		}
		again, err := json.Marshal(bridge.NoticeOf(bridge.DeadLetter{Reason: n.Reason, Queue: n.Queue, At: time.UnixMilli(n.At)}, env))
		if err != nil {
			t.Fatal(err)
		}
		_, env2, err := bridge.ParseDeadLetterNotice(again)
		if err != nil || !bytes.Equal(env2.SigningInput(), env.SigningInput()) || !bytes.Equal(env2.Sig, env.Sig) {
			t.Fatalf("round trip changed it: %v", err)
		}
	})
}
