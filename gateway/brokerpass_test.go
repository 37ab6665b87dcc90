package gateway_test

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/herdbridge/herdbridge/gateway"
)

// TestBrokerPasswordJoinedToTheURL: the password goes to the user the URL
// names, escaped; a URL with no user, or with a password of its own, is
// refused with a sentence saying what to write.
func TestBrokerPasswordJoinedToTheURL(t *testing.T) {
	got, err := gateway.WithBrokerPassword("amqps://gw1@mq.example:5671/vh", "p@ss:w/rd %")
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(got)
	if err != nil {
		t.Fatal(err)
	}
	if pw, _ := u.User.Password(); pw != "p@ss:w/rd %" || u.User.Username() != "gw1" || u.Host != "mq.example:5671" || u.Path != "/vh" {
		t.Errorf("joined: %s", got)
	}
	if same, err := gateway.WithBrokerPassword("amqp://u:p@mq/", ""); err != nil || same != "amqp://u:p@mq/" {
		t.Errorf("no password given changes the URL: %q %v", same, err)
	}
	for uri, want := range map[string]string{
		"amqp://mq.example/":       "names no user",
		"amqp://u:old@mq.example/": "drop :PASSWORD from the URL",
	} {
		if _, err := gateway.WithBrokerPassword(uri, "new"); err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "old") {
			t.Errorf("%s: %v, want %q (and the old password not shown)", uri, err, want)
		}
	}
}

// TestBrokerPasswordSources: the file (flag, else
// $HERDBRIDGE_BROKER_PASSWORD_FILE) wins over the config's brokerPassword;
// a password file or a config file holding brokerPassword that others may
// read is refused with the chmod to run.
func TestBrokerPasswordSources(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flag := write("flag", "from-flag\nignored second line\n", 0o600)
	env := write("env", "from-env", 0o400)
	t.Setenv(gateway.BrokerPasswordFileEnv, env)
	cfg := gateway.FileConfig{BrokerPassword: "from-config"}
	for _, c := range []struct{ file, want string }{{flag, "from-flag"}, {"", "from-env"}} {
		if pw, err := gateway.BrokerPassword(c.file, cfg); err != nil || pw != c.want {
			t.Errorf("file %q: %q %v, want %q", c.file, pw, err, c.want)
		}
	}
	os.Unsetenv(gateway.BrokerPasswordFileEnv)
	if pw, err := gateway.BrokerPassword("", cfg); err != nil || pw != "from-config" {
		t.Errorf("config: %q %v", pw, err)
	}
	open := write("open", "pw", 0o644)
	if _, err := gateway.BrokerPassword(open, cfg); err == nil || !strings.Contains(err.Error(), "chmod 600 "+open) {
		t.Errorf("a 0644 password file: %v", err)
	}
	if _, err := gateway.BrokerPassword(write("empty", "\n", 0o600), cfg); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("an empty password file: %v", err)
	}

	conf := write("config.json", `{"brokerPassword":"pw"}`, 0o644)
	if _, err := gateway.LoadFile(conf, true); err == nil || !strings.Contains(err.Error(), "chmod 600 "+conf) {
		t.Errorf("a 0644 config with brokerPassword: %v", err)
	}
	os.Chmod(conf, 0o600)
	if c, err := gateway.LoadFile(conf, true); err != nil || c.BrokerPassword != "pw" {
		t.Errorf("a 0600 config with brokerPassword: %+v %v", c, err)
	}
	if _, err := gateway.LoadFile(write("plain.json", `{"maxWorkers":2}`, 0o644), true); err != nil {
		t.Errorf("a 0644 config without a password is fine: %v", err)
	}
}

// TestArgvPassword finds a URL with a password in any flag form, and
// shows it redacted.
func TestArgvPassword(t *testing.T) {
	for _, c := range []struct {
		argv []string
		want string
	}{
		{[]string{"hb", "gateway", "--broker", "amqp://u:secret@mq/"}, "--broker amqp://u:xxxxx@mq/"},
		{[]string{"hb", "gateway", "--broker=amqps://u:secret@mq:5671/"}, "--broker amqps://u:xxxxx@mq:5671/"},
		{[]string{"hb", "pair", "amqp://u:secret@mq/"}, "amqp://u:xxxxx@mq/"},
		{[]string{"hb", "gateway", "--broker", "amqp://u@mq/", "--broker-password-file", "/p"}, ""},
		{[]string{"hb", "gateway", "--listen", "127.0.0.1:7077"}, ""},
	} {
		if got := gateway.ArgvPassword(c.argv); got != c.want {
			t.Errorf("%q: %q, want %q", c.argv, got, c.want)
		}
	}
}
