package keys

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// File names inside a gateway state directory.
const (
	KeyFile    = "host_ed25519"     // private key, OpenSSH format, mode 0600
	PubFile    = "host_ed25519.pub" // one line "ssh-ed25519 AAAA… herdbridge@<host>"
	TrustFile  = "trusted_hosts"    // trust file
	RetiredDir = "retired_keys"     // previous host keys after `keys rotate` (0700 dir, 0600 files)
)

// maxKeyFile bounds what Load reads: an ed25519 key file is ~400 bytes.
const maxKeyFile = 64 << 10

// keyType is the only key type herdbridge signs and verifies with.
const keyType = ssh.KeyAlgoED25519 // "ssh-ed25519"

// HostKey is a gateway's Ed25519 host key. Its String, GoString and
// LogValue print the fingerprint, never the private key.
type HostKey struct {
	priv    ed25519.PrivateKey
	pub     ed25519.PublicKey
	comment string
}

// Sign signs msg with the host key (ed25519.Sign).
func (k *HostKey) Sign(msg []byte) []byte { return ed25519.Sign(k.priv, msg) }

// Public returns the host's public key.
func (k *HostKey) Public() ed25519.PublicKey { return k.pub }

// Fingerprint returns the public key's SHA256 fingerprint.
func (k *HostKey) Fingerprint() string { return Fingerprint(k.pub) }

// AuthorizedLine returns the public key as one authorized_keys-style line,
// "ssh-ed25519 AAAA… herdbridge@host", without a trailing newline.
func (k *HostKey) AuthorizedLine() string {
	if k.comment == "" {
		return FormatPublicKey(k.pub)
	}
	return FormatPublicKey(k.pub) + " " + k.comment
}

func (k *HostKey) String() string       { return "ed25519 host key " + Fingerprint(k.pub) }
func (k *HostKey) GoString() string     { return k.String() }
func (k *HostKey) LogValue() slog.Value { return slog.StringValue(Fingerprint(k.pub)) }

// Fingerprint returns pub's fingerprint exactly as `ssh-keygen -l` prints
// it: "SHA256:" and the unpadded base64 of the SHA-256 of the key's SSH
// wire encoding (ssh.FingerprintSHA256).
func Fingerprint(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(wireBlob(pub))
	return "SHA256:" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// FormatPublicKey returns "ssh-ed25519 AAAA…" for pub, with no comment; it
// is what ParsePublicKey and the trust file read.
func FormatPublicKey(pub ed25519.PublicKey) string {
	return keyType + " " + base64.StdEncoding.EncodeToString(wireBlob(pub))
}

// wireBlob is the SSH wire encoding of an ed25519 public key (RFC 8709).
func wireBlob(pub ed25519.PublicKey) []byte {
	b := make([]byte, 0, 4+len(keyType)+4+len(pub))
	b = binary.BigEndian.AppendUint32(b, uint32(len(keyType)))
	b = append(b, keyType...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(pub)))
	return append(b, pub...)
}

// ParsePublicKey accepts "ssh-ed25519 AAAA… [comment]": what `herdbridge
// keys show` prints, or the line of a .pub file. Any other key type is
// refused with an error that says so.
func ParsePublicKey(line string) (ed25519.PublicKey, error) {
	f := strings.Fields(line)
	switch len(f) {
	case 0:
		return nil, errors.New(`keys: empty public key; expected "ssh-ed25519 AAAA… [comment]" (what herdbridge keys show prints)`)
	case 1:
		return nil, fmt.Errorf(`keys: %.40q is not a public key; expected "ssh-ed25519 AAAA… [comment]" (what herdbridge keys show prints)`, f[0])
	}
	pub, err := parseKeyFields(f[0], f[1])
	if err != nil {
		return nil, fmt.Errorf("keys: %s", err)
	}
	return pub, nil
}

// parseKeyFields parses the type and base64 fields of a public key line.
// Its errors carry no package prefix: callers add where the key came from.
func parseKeyFields(typ, b64 string) (ed25519.PublicKey, error) {
	if typ != keyType {
		if isSSHKeyType(typ) {
			return nil, fmt.Errorf("%.40s key; herdbridge host keys are Ed25519 (ssh-ed25519, made with ssh-keygen -t ed25519)", typ)
		}
		return nil, fmt.Errorf(`expected "ssh-ed25519 AAAA…", got %.40q`, typ)
	}
	blob, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("ssh-ed25519 key %.20q… is not valid base64 (was the line cut or wrapped?)", b64)
	}
	pk, err := ssh.ParsePublicKey(blob)
	if err != nil {
		return nil, fmt.Errorf("ssh-ed25519 key does not decode: %v", err)
	}
	if pk.Type() != keyType {
		return nil, fmt.Errorf("line says ssh-ed25519 but the key inside is %.40s", pk.Type())
	}
	cpk, ok := pk.(ssh.CryptoPublicKey)
	if !ok {
		return nil, errors.New("ssh-ed25519 key does not decode")
	}
	epk, ok := cpk.CryptoPublicKey().(ed25519.PublicKey)
	if !ok || len(epk) != ed25519.PublicKeySize {
		return nil, errors.New("ssh-ed25519 key does not decode")
	}
	return append(ed25519.PublicKey(nil), epk...), nil
}

// isSSHKeyType reports whether s names an SSH public key algorithm (so an
// error can say "that is an RSA key" instead of "that is not a key").
func isSSHKeyType(s string) bool {
	return strings.HasPrefix(s, "ssh-") || strings.HasPrefix(s, "ecdsa-") || strings.HasPrefix(s, "sk-") ||
		strings.HasPrefix(s, "rsa-sha2-")
}

// Load reads an OpenSSH private key file (keys made by
// `ssh-keygen -t ed25519 -N ”` work). It refuses, each with an error that
// says what to do: a file group or others can read, a key that is not
// Ed25519, and a passphrase-protected key (a gateway starts unattended).
// The key's comment is taken from path+".pub" when that file holds the same
// key, else it is "herdbridge".
func Load(path string) (*HostKey, error) {
	k, err := load(path)
	if err != nil {
		return nil, err
	}
	k.comment = pubComment(path+".pub", k.pub)
	if k.comment == "" {
		k.comment = "herdbridge"
	}
	return k, nil
}

func load(path string) (*HostKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("keys: %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("keys: %s is mode %04o; run chmod 600 %s", path, perm, path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("keys: reading %s: %w", path, err)
	}
	if len(data) > maxKeyFile {
		return nil, fmt.Errorf("keys: %s is larger than %d bytes: not a host key", path, maxKeyFile)
	}
	raw, err := ssh.ParseRawPrivateKey(data)
	if err != nil {
		var pm *ssh.PassphraseMissingError
		if errors.As(err, &pm) {
			return nil, fmt.Errorf("keys: %s is protected by a passphrase; a gateway starts unattended, so remove it: ssh-keygen -p -N '' -f %s", path, path)
		}
		return nil, fmt.Errorf("keys: %s is not an OpenSSH private key: %w", path, err)
	}
	var priv ed25519.PrivateKey
	switch p := raw.(type) {
	case *ed25519.PrivateKey:
		priv = *p
	case ed25519.PrivateKey:
		priv = p
	default:
		name := strings.TrimSuffix(strings.TrimPrefix(fmt.Sprintf("%T", raw), "*"), ".PrivateKey")
		article := "an"
		if name == "dsa" {
			article = "a"
		}
		return nil, fmt.Errorf("keys: %s is %s %s key; herdbridge host keys are Ed25519 (ssh-keygen -t ed25519)", path, article, name)
	}
	if len(priv) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("keys: %s: ed25519 key has the wrong size", path)
	}
	priv = append(ed25519.PrivateKey(nil), priv...)
	return &HostKey{priv: priv, pub: priv.Public().(ed25519.PublicKey)}, nil
}

// pubComment returns the comment of the .pub file at path if that file
// holds pub, else "".
func pubComment(path string, pub ed25519.PublicKey) string {
	data, err := os.ReadFile(path)
	if err != nil || len(data) > 16<<10 {
		return ""
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return ""
	}
	got, err := parseKeyFields(f[0], f[1])
	if err != nil || !got.Equal(pub) {
		return ""
	}
	return sanitizeComment(strings.Join(f[2:], " "))
}

// sanitizeComment keeps a key comment on one printable line.
func sanitizeComment(c string) string {
	return strings.Join(strings.Fields(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, c)), " ")
}

// LoadOrCreate loads stateDir/host_ed25519, or, when it is absent,
// generates one (crypto/rand) and writes it mode 0600 and the .pub 0644.
// created reports whether it was generated. host is only used for the key
// comment ("herdbridge@host") of a new key or when the .pub is missing;
// a missing or stale .pub is rewritten. Two processes racing to create the
// key end up with the same one.
func LoadOrCreate(stateDir, host string) (k *HostKey, created bool, err error) {
	path := filepath.Join(stateDir, KeyFile)
	k, err = load(path)
	if errors.Is(err, fs.ErrNotExist) {
		if err := mkdirPrivate(stateDir); err != nil {
			return nil, false, err
		}
		nk, err := generate(host)
		if err != nil {
			return nil, false, err
		}
		data, err := marshalPrivate(nk)
		if err != nil {
			return nil, false, err
		}
		created, err = createExclusive(path, data, 0o600)
		if err != nil {
			return nil, false, err
		}
		if created {
			k = nk
		} else if k, err = load(path); err != nil { // another process won the race
			return nil, false, err
		}
	} else if err != nil {
		return nil, false, err
	}
	pubPath := filepath.Join(stateDir, PubFile)
	if created {
		k.comment = "herdbridge@" + sanitizeComment(host)
	} else if k.comment = pubComment(pubPath, k.pub); k.comment == "" {
		k.comment = "herdbridge@" + sanitizeComment(host)
	} else {
		return k, false, nil // .pub present and current
	}
	if err := writeFileAtomic(pubPath, []byte(k.AuthorizedLine()+"\n"), 0o644); err != nil {
		return nil, false, err
	}
	return k, created, nil
}

// Rotate moves the current key to stateDir/retired_keys/host_ed25519.<unix
// seconds> (the file's bytes unchanged) and generates a new current key
// and .pub. It returns the new key. The retired key stays there so this
// host's messages signed before the rotation still verify on this host's
// Ring; delete retired files once nothing signed with them is in flight.
func Rotate(stateDir, host string) (*HostKey, error) {
	path := filepath.Join(stateDir, KeyFile)
	if _, err := load(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("keys: no host key in %s to rotate: run `herdbridge keys init`", stateDir)
		}
		return nil, err
	}
	old, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	nk, err := generate(host)
	if err != nil {
		return nil, err
	}
	data, err := marshalPrivate(nk)
	if err != nil {
		return nil, err
	}
	retired := filepath.Join(stateDir, RetiredDir)
	if err := mkdirPrivate(retired); err != nil {
		return nil, err
	}
	if err := retireCopy(retired, KeyFile, old, time.Now()); err != nil {
		return nil, err
	}
	if err := writeFileAtomic(path, data, 0o600); err != nil {
		return nil, err
	}
	if err := writeFileAtomic(filepath.Join(stateDir, PubFile), []byte(nk.AuthorizedLine()+"\n"), 0o644); err != nil {
		return nil, err
	}
	return nk, nil
}

func generate(host string) (*HostKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("keys: generating a host key: %w", err)
	}
	return &HostKey{priv: priv, pub: pub, comment: "herdbridge@" + sanitizeComment(host)}, nil
}

func marshalPrivate(k *HostKey) ([]byte, error) {
	block, err := ssh.MarshalPrivateKey(k.priv, k.comment)
	if err != nil {
		return nil, fmt.Errorf("keys: encoding the host key: %w", err)
	}
	return pem.EncodeToMemory(block), nil
}

// createExclusive writes data to path only if path does not exist, and
// reports whether it did. The content appears complete or not at all: a
// fsync'ed temporary file is hard-linked to path (link fails if path
// exists).
func createExclusive(path string, data []byte, perm os.FileMode) (created bool, err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp*")
	if err != nil {
		return false, fmt.Errorf("keys: writing %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err = f.Chmod(perm); err == nil {
		if _, err = f.Write(data); err == nil {
			err = f.Sync()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("keys: writing %s: %w", path, err)
	}
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		// No hard links on this file system: exclusive create instead.
		g, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("keys: writing %s: %w", path, err)
		}
		if err = g.Chmod(perm); err == nil {
			if _, err = g.Write(data); err == nil {
				err = g.Sync()
			}
		}
		if cerr := g.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
			return false, fmt.Errorf("keys: writing %s: %w", path, err)
		}
	}
	syncDir(dir)
	return true, nil
}

// retireCopy keeps old, the key file name held until now, in dir as
// name.<unix>[.n] (mode 0600, never over an earlier copy): the host key's
// and the HPKE key's rotations keep their retired keys alike.
func retireCopy(dir, name string, old []byte, now time.Time) error {
	base := filepath.Join(dir, name+"."+strconv.FormatInt(now.Unix(), 10))
	for i := 0; ; i++ {
		file := base
		if i > 0 {
			file = base + "." + strconv.Itoa(i)
		}
		ok, err := createExclusive(file, old, 0o600)
		if err != nil || ok {
			return err
		}
	}
}
