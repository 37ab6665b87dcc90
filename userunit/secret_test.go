package userunit

import (
	"strings"
	"testing"
)

// TestEnvEscapes: the EnvironmentFile's value keeps every character of the
// URL as it is (quotes and backquotes are escaped too), and a URL
// url.Parse refuses still counts as holding a password, so it leaves argv.
func TestEnvEscapes(t *testing.T) {
	if got := Env("amqp://u:a\"b`c\\d@mq/"); !strings.Contains(got, `HERDBRIDGE_BROKER="amqp://u:a\"b\`+"`"+`c\\d@mq/"`) {
		t.Errorf("escaped: %s", got)
	}
	if rest, u := SplitBrokerSecret([]string{"--broker", "amqp://u:p\"q@mq/", "-v"}); u == "" || len(rest) != 1 {
		t.Errorf("an unparsable URL with a password stayed in argv: %q %q", rest, u)
	}
}
