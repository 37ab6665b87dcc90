package pairing

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/keys"
)

// TestOlderJoinerToldTheVersion: a joiner of pairing v1 (herdbridge before
// CPace draft-21) is answered on its own address with a message of this
// version, which v1 refuses at once by its version ("message version 2;
// this herdbridge speaks 1"), instead of timing out or blaming the code;
// the initiator counts the attempt with a sentence naming both versions.
func TestOlderJoinerToldTheVersion(t *testing.T) {
	rv := newMem()
	a, b := newParty(t, "hostA"), newParty(t, "hostB")
	o := a.opts()
	o.MaxFailures = 1
	offer, done := listen(t, rv, o)
	sid := bytes.Repeat([]byte{7}, sidLen)
	mine, err := rv.Open(context.Background(), joinerAddr(offer.Code(), sid))
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString
	v1Hello := `{"v":1,"t":"hello","sid":"` + b64(sid) + `","host":"hostB","key":"` + keys.FormatPublicKey(b.pub) +
		`","share":"` + b64(make([]byte, shareLen)) + `"}`
	if err := mine.Send(context.Background(), InitiatorAddr(offer.Code()), []byte(v1Hello), time.Second); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	raw, err := mine.Next(ctx)
	if err != nil {
		t.Fatalf("the v1 joiner got no answer: %v", err)
	}
	var answer map[string]any
	if err := json.Unmarshal(raw, &answer); err != nil {
		t.Fatal(err)
	}
	// pairing v1 decodes with DisallowUnknownFields, then checks v: the
	// answer must carry only fields v1 knows, and v != 1
	if answer["v"] != float64(version) || answer["t"] != TypeAbort || answer["sid"] != b64(sid) || len(answer) != 3 {
		t.Errorf("answer to a v1 joiner: %s, want a v%d abort of its session and nothing else", raw, version)
	}
	w := <-done
	if !errors.Is(w.err, ErrTooManyTries) || !strings.Contains(w.err.Error(), "pairing version 1") || !strings.Contains(w.err.Error(), "speaks version 2") {
		t.Errorf("initiator: %v, want the attempt refused naming versions 1 and 2", w.err)
	}
	a.mustTrustNothing(t)
}

// TestOtherVersionRefusedByName: a message of another version is refused
// with ErrVersion and a sentence naming both versions and what to do.
func TestOtherVersionRefusedByName(t *testing.T) {
	for _, v := range []string{"1", "3"} {
		_, err := ParseMessage([]byte(`{"v":` + v + `,"t":"abort","sid":"AAAAAAAAAAAAAAAAAAAAAA=="}`))
		if !errors.Is(err, ErrVersion) || !strings.Contains(err.Error(), "pairing version "+v) ||
			!strings.Contains(err.Error(), "run the same herdbridge release on both hosts") {
			t.Errorf("v%s: %v", v, err)
		}
	}
}
