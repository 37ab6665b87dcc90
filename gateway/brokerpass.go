package gateway

// The broker password kept out of argv: a `--broker amqp://user:PASS@…`
// shows in `ps` and /proc/PID/cmdline to every local user. The password
// may instead come from a file (--broker-password-file, or
// $HERDBRIDGE_BROKER_PASSWORD_FILE) or the config file's brokerPassword,
// each readable by its owner only (mode 0600); it is joined to the user the
// broker URL names (amqp://user@host/). One step per URL
// (WithBrokerPassword), so a list of broker URLs takes the same password
// each.

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
)

// BrokerPasswordFileEnv names the password file when no flag does.
const BrokerPasswordFileEnv = "HERDBRIDGE_BROKER_PASSWORD_FILE"

// maxPasswordFile bounds what a password file may hold.
const maxPasswordFile = 4 << 10

// BrokerPassword is the password for the broker URL, from the first source
// set: the file flag (passwordFile), $HERDBRIDGE_BROKER_PASSWORD_FILE, the
// config file's brokerPassword. "" when none is: the URL is used as it is.
func BrokerPassword(passwordFile string, file FileConfig) (string, error) {
	if passwordFile == "" {
		passwordFile = os.Getenv(BrokerPasswordFileEnv)
	}
	if passwordFile != "" {
		return ReadPasswordFile(passwordFile)
	}
	return file.BrokerPassword, nil
}

// ReadPasswordFile reads a broker password: the file's first line, which
// must not be empty, from a file only its owner can read.
func ReadPasswordFile(path string) (string, error) {
	if err := CheckPrivateFile(path, "the broker password file"); err != nil {
		return "", err
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("broker password file: %w", err)
	}
	if len(raw) > maxPasswordFile {
		return "", fmt.Errorf("broker password file %s: %d bytes, over %d: it holds one line, the password", path, len(raw), maxPasswordFile)
	}
	pw, _, _ := strings.Cut(string(raw), "\n")
	pw = strings.TrimSuffix(pw, "\r")
	if pw == "" {
		return "", fmt.Errorf("broker password file %s: its first line is empty: write the password on it", path)
	}
	return pw, nil
}

// CheckPrivateFile refuses a file that users other than its owner may
// read or write (what: how to name it in the error).
func CheckPrivateFile(path, what string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%s %s is mode %04o: other users can read the broker password in it: chmod 600 %s", what, path, perm, path)
	}
	return nil
}

// WithBrokerPassword is uri with password as the password of the user it
// names. password "" leaves uri as it is. A URI with no user, or with a
// password of its own, is refused: the password is given once.
func WithBrokerPassword(uri, password string) (string, error) {
	if password == "" {
		return uri, nil
	}
	u, err := url.Parse(uri)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("broker URL %q with a password file: not an amqp[s]://user@host/ URL", redactURL(uri))
	}
	if u.User == nil || u.User.Username() == "" {
		return "", fmt.Errorf("broker URL %s names no user for the password file's password: write it as %s://USER@%s%s", redactURL(uri), u.Scheme, u.Host, u.Path)
	}
	if _, has := u.User.Password(); has {
		return "", errors.New("the broker URL carries a password and a password file (or the config's brokerPassword) gives one too: " +
			"drop :PASSWORD from the URL, which shows in ps, and keep it in the file")
	}
	u.User = url.UserPassword(u.User.Username(), password)
	return u.String(), nil
}

// ArgvPassword reports which argument of argv carries a URL with a
// password (the flag's name or the argument itself, redacted), "" if
// none: what `doctor` warns of, since argv is readable by every local
// user.
func ArgvPassword(argv []string) string {
	for i, a := range argv {
		flag, v := "", a
		if strings.HasPrefix(a, "-") {
			f, after, ok := strings.Cut(a, "=")
			if !ok {
				continue
			}
			flag, v = f, after
		} else if i > 0 && strings.HasPrefix(argv[i-1], "-") {
			flag = argv[i-1]
		}
		u, err := url.Parse(v)
		if err != nil || u.User == nil || !strings.Contains(v, "://") {
			continue
		}
		if _, has := u.User.Password(); has {
			return strings.TrimSpace(flag + " " + u.Redacted())
		}
	}
	return ""
}

// redactURL is uri with its password, if any, shown as xxxxx.
func redactURL(uri string) string {
	u, err := url.Parse(uri)
	if err != nil || u.User == nil {
		return uri
	}
	return u.Redacted()
}
