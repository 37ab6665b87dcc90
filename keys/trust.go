package keys

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

var (
	ErrUnknownHost  = errors.New("keys: host not in the trust file")
	ErrBadSignature = errors.New("keys: signature does not verify under any trusted key of the host")
)

// TrustError is a trust file line that does not parse.
type TrustError struct {
	Path string // "" when parsed from a reader
	Line int    // 1-based
	Msg  string // what is wrong
}

func (e *TrustError) Error() string {
	where := "trust file"
	if e.Path != "" {
		where = e.Path
	}
	return fmt.Sprintf("keys: %s line %d: %s", where, e.Line, e.Msg)
}

const trustLineForm = `"HOST ssh-ed25519 AAAA… [comment]"`

// trustHeader starts a trust file Trust creates.
const trustHeader = "# herdbridge trusted hosts: one \"HOST ssh-ed25519 AAAA… [comment]\" per line;\n" +
	"# a host may have several lines (key rotation). Edit with herdbridge keys trust|revoke.\n"

// CheckHost returns an error unless host is a valid host id:
// ^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$.
func CheckHost(host string) error {
	if msg := hostProblem(host); msg != "" {
		return errors.New("keys: " + msg)
	}
	return nil
}

func hostProblem(host string) string {
	ok := len(host) >= 1 && len(host) <= 63
	for i := 0; ok && i < len(host); i++ {
		c := host[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		ok = alnum || i > 0 && (c == '.' || c == '_' || c == '-')
	}
	if ok {
		return ""
	}
	return fmt.Sprintf("host id %.70q is not valid: 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit", host)
}

// parseTrustLine parses one trust file line. ok is false for a blank or
// comment line. err is a message without position.
func parseTrustLine(line string) (host string, key ed25519.PublicKey, ok bool, err error) {
	line = strings.TrimSuffix(line, "\r")
	t := strings.TrimSpace(line)
	if t == "" || t[0] == '#' {
		return "", nil, false, nil
	}
	f := strings.Fields(t)
	if isSSHKeyType(f[0]) && (len(f) < 2 || !isSSHKeyType(f[1])) {
		return "", nil, false, errors.New("the host id is missing: expected " + trustLineForm)
	}
	if len(f) < 3 {
		return "", nil, false, fmt.Errorf("expected %s, got %d field(s)", trustLineForm, len(f))
	}
	if msg := hostProblem(f[0]); msg != "" {
		return "", nil, false, errors.New(msg)
	}
	key, perr := parseKeyFields(f[1], f[2])
	if perr != nil {
		return "", nil, false, fmt.Errorf("host %s: %v", f[0], perr)
	}
	return f[0], key, true, nil
}

// ParseTrust reads a trust file: one "<host> ssh-ed25519 AAAA… [comment]"
// per line, '#' comments and blank lines allowed; a host may have several
// lines (several keys, during a rotation). A key listed twice for a host
// counts once. It never panics; an error is a *TrustError naming the line
// and what is wrong.
func ParseTrust(r io.Reader) (map[string][]ed25519.PublicKey, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("keys: reading the trust file: %w", err)
	}
	return parseTrust(data, "")
}

func parseTrust(data []byte, path string) (map[string][]ed25519.PublicKey, error) {
	m := make(map[string][]ed25519.PublicKey)
	for i, line := range strings.Split(string(data), "\n") {
		host, key, ok, err := parseTrustLine(line)
		if err != nil {
			return nil, &TrustError{Path: path, Line: i + 1, Msg: err.Error()}
		}
		if ok && !containsKey(m[host], key) {
			m[host] = append(m[host], key)
		}
	}
	return m, nil
}

func containsKey(list []ed25519.PublicKey, k ed25519.PublicKey) bool {
	for _, x := range list {
		if x.Equal(k) {
			return true
		}
	}
	return false
}

// ReadTrust parses the trust file at path; an absent file is an empty
// trust set.
func ReadTrust(path string) (map[string][]ed25519.PublicKey, error) {
	data, _, err := readTrustFile(path)
	if err != nil {
		return nil, err
	}
	return parseTrust(data, path)
}

// readTrustFile returns the file's bytes and mode; an absent file is empty
// with mode 0600.
func readTrustFile(path string) ([]byte, os.FileMode, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0o600, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("keys: %w", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, 0, fmt.Errorf("keys: %w", err)
	}
	return data, fi.Mode().Perm(), nil
}

// Trust adds host→key to the trust file at path, creating it (mode 0600,
// and its directory) if absent. Adding a key the host already has changes
// nothing. A trust file that does not parse is not touched: the error names
// its bad line. The file is replaced atomically (temporary file, fsync,
// rename) and keeps its mode. Concurrent Trust/Revoke calls on one file
// are not serialized: the last writer wins.
func Trust(path, host string, key ed25519.PublicKey) error {
	if err := CheckHost(host); err != nil {
		return err
	}
	if len(key) != ed25519.PublicKeySize {
		return fmt.Errorf("keys: an ed25519 public key is %d bytes, got %d", ed25519.PublicKeySize, len(key))
	}
	data, perm, err := readTrustFile(path)
	if err != nil {
		return err
	}
	m, err := parseTrust(data, path)
	if err != nil {
		return err
	}
	if containsKey(m[host], key) {
		return nil
	}
	var b bytes.Buffer
	if len(data) == 0 {
		b.WriteString(trustHeader)
	}
	b.Write(data)
	if len(data) > 0 && data[len(data)-1] != '\n' {
		b.WriteByte('\n')
	}
	b.WriteString(host + " " + FormatPublicKey(key) + "\n")
	if err := mkdirPrivate(filepath.Dir(path)); err != nil {
		return err
	}
	return writeFileAtomic(path, b.Bytes(), perm)
}

// Revoke removes host's lines from the trust file at path: every key of
// the host when key is nil, else just that key. It returns how many lines
// it removed; removing nothing is an error (wrapping ErrUnknownHost when
// the host has no key at all). Other lines, comments included, are kept
// byte for byte. A trust file that does not parse is not touched.
func Revoke(path, host string, key ed25519.PublicKey) (int, error) {
	data, perm, err := readTrustFile(path)
	if err != nil {
		return 0, err
	}
	lines := strings.Split(string(data), "\n")
	kept := lines[:0:0]
	var others []string // fingerprints of host's keys not removed
	n := 0
	for i, line := range lines {
		h, k, ok, err := parseTrustLine(line)
		if err != nil {
			return 0, &TrustError{Path: path, Line: i + 1, Msg: err.Error()}
		}
		if ok && h == host {
			if key == nil || k.Equal(key) {
				n++
				continue
			}
			others = append(others, Fingerprint(k))
		}
		kept = append(kept, line)
	}
	if n == 0 {
		if key == nil || len(others) == 0 {
			return 0, fmt.Errorf("keys: nothing revoked: host %q is not in %s: %w", host, path, ErrUnknownHost)
		}
		return 0, fmt.Errorf("keys: nothing revoked: %s is not a trusted key of host %q in %s (its keys: %s)",
			Fingerprint(key), host, path, strings.Join(others, ", "))
	}
	if err := writeFileAtomic(path, []byte(strings.Join(kept, "\n")), perm); err != nil {
		return 0, err
	}
	return n, nil
}
