package userunit

// The service unit keeps the broker password out of ExecStart: a unit's
// command line is the gateway's argv, which every local user reads in ps
// and /proc/PID/cmdline (and `systemctl show` prints ExecStart to anyone).
// A --broker URL carrying a password is moved into an EnvironmentFile of
// mode 0600 as HERDBRIDGE_BROKER, the default of --broker; the
// environment of a process is readable by its own user only.

import (
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// brokerEnvName is the environment variable --broker defaults to.
const brokerEnvName = "HERDBRIDGE_BROKER"

// SplitBrokerSecret takes out of args the --broker flag whose URL holds a
// password, returning the remaining args and that URL ("" when there is
// none: a URL without a password stays where it is).
func SplitBrokerSecret(args []string) (rest []string, secretURL string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--broker" && i+1 < len(args) && urlHasPassword(args[i+1]) {
			secretURL = args[i+1]
			i++
			continue
		}
		if v, ok := strings.CutPrefix(a, "--broker="); ok && urlHasPassword(v) {
			secretURL = v
			continue
		}
		rest = append(rest, a)
	}
	return rest, secretURL
}

// urlHasPassword: s is a URL whose user info holds a password. A string
// url.Parse refuses (characters a URL may not hold) counts when it looks
// like scheme://user:pass@…: better moved than left on the command line.
func urlHasPassword(s string) bool {
	u, err := url.Parse(s)
	if err != nil {
		_, rest, ok := strings.Cut(s, "://")
		at := strings.LastIndex(rest, "@")
		return ok && at > 0 && strings.Contains(rest[:at], ":")
	}
	if u.User == nil {
		return false
	}
	_, has := u.User.Password()
	return has
}

// envPath is the unit's EnvironmentFile, beside the unit's own
// config: $XDG_CONFIG_HOME/herdbridge/gateway.env.
func envPath() (string, error) {
	unit, err := Path()
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(filepath.Dir(filepath.Dir(unit))), "herdbridge", "gateway.env"), nil
}

// Env is the EnvironmentFile's content: HERDBRIDGE_BROKER, double
// quoted with systemd's escapes, so no character of the URL is expanded.
func Env(brokerURL string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `\$`, "`", "\\`")
	return "# herdbridge gateway: the broker URL, kept out of the unit's command line (mode 0600)\n" +
		brokerEnvName + `="` + r.Replace(brokerURL) + "\"\n"
}

// writeEnv writes the EnvironmentFile, mode 0600 in a 0700 dir
// (an existing file is made 0600 too).
func writeEnv(path, content string, stdout io.Writer) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".gateway.env.tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(content); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s (mode 0600: the broker URL with its password)\n", path)
	return nil
}
