package bridge

import (
	"encoding/json"
	"testing"
)

// jsonCost is never below what encoding/json writes for a body (the budget
// would then undercount a result), and equals it for valid UTF-8 without
// U+FFFD.
func FuzzJSONCost(f *testing.F) {
	for _, s := range []string{"", "plain", `"quoted" \ back`, "<&>", "\x00\x01\x1f\n\t\r\b\f", "\u2028\u2029", "é漢🙂", "\xff\xfe", "\uFFFD", "a\xc3"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		raw, err := json.Marshal(string(body))
		if err != nil {
			t.Fatal(err)
		}
		want := len(raw) - 2
		got := jsonCost(body)
		if got < want {
			t.Fatalf("jsonCost(%q) = %d, under the %d bytes encoding/json writes", body, got, want)
		}
		if s := jsonCostString(string(body)); s != got {
			t.Fatalf("jsonCostString(%q) = %d, jsonCost %d", body, s, got)
		}
	})
}

func TestJSONCostExact(t *testing.T) {
	for _, s := range []string{"plain", `"quoted" \ back`, "<&>", "\x00\x01\x1f\n\t\r\b\f", "\u2028\u2029", "é漢🙂"} {
		raw, _ := json.Marshal(s)
		if got, want := jsonCost([]byte(s)), len(raw)-2; got != want {
			t.Errorf("jsonCost(%q) = %d, want %d", s, got, want)
		}
	}
}
