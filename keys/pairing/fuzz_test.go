package pairing

import (
	"bytes"
	"testing"
)

func FuzzParseCode(f *testing.F) {
	for _, s := range []string{"ABCD-EFGH", "abcd efgh", "0O1I-L", "", "ÄÖÜ", "ABCDEFGHJ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCode(s)
		if err != nil {
			return
		}
		if len(c) != CodeLen {
			t.Fatalf("%q parsed to %q", s, c)
		}
		if back, err := ParseCode(c.String()); err != nil || back != c {
			t.Fatalf("%q: %q does not parse back: %q %v", s, c, back, err)
		}
	})
}

func FuzzParseMessage(f *testing.F) {
	sid := make([]byte, sidLen)
	f.Add([]byte(`{"v":2,"t":"abort","sid":"AAAAAAAAAAAAAAAAAAAAAA=="}`))
	f.Add((&Message{Type: TypeConfirm, SID: sid, Tag: make([]byte, tagLen)}).Marshal())
	f.Add([]byte(`{"v":2,"t":"hello","sid":"AAAAAAAAAAAAAAAAAAAAAA==","host":"h","key":"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl","share":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseMessage(data)
		if err != nil {
			return
		}
		again, err := ParseMessage(m.Marshal())
		if err != nil {
			t.Fatalf("a parsed message does not parse again: %v", err)
		}
		if again.Type != m.Type || !bytes.Equal(again.SID, m.SID) || again.Host != m.Host || !again.Key.Equal(m.Key) ||
			!bytes.Equal(again.Share, m.Share) || !bytes.Equal(again.Tag, m.Tag) {
			t.Fatalf("round trip changed the message: %+v -> %+v", m, again)
		}
	})
}
