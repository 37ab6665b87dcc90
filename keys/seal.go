package keys

import (
	"crypto/hpke"
	"crypto/sha256"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Sealing (issue 23): besides its Ed25519 signing key, each host has an
// HPKE (RFC 9180) key pair that other hosts seal message bodies to. The
// KEM is the post-quantum hybrid ML-KEM-768 + X25519: a recording of
// today's broker traffic stays closed to a later quantum computer, and
// X25519 keeps it closed if ML-KEM is broken.
const (
	SealKeyFile = "host_hpke"     // private key, PEM, mode 0600
	SealPubFile = "host_hpke.pub" // "hpke-mlkem768x25519 BASE64 herdbridge@<host>"
	// SealKeyType names the key in the .pub file and in heartbeats.
	SealKeyType = "hpke-mlkem768x25519"
	// SealRetention is how long a retired HPKE private key is kept after
	// a rotation: a message sealed to the old key may wait in an inbox up
	// to its TTL (24 h by default) plus a broker outage; past this window
	// the retired key is deleted and such a message no longer opens.
	SealRetention = 8 * 24 * time.Hour
)

const sealPEMType = "HERDBRIDGE HPKE PRIVATE KEY"

// SealKEM is the KEM every herdbridge HPKE key is for.
func SealKEM() hpke.KEM { return hpke.MLKEM768X25519() }

// SealKey is one HPKE key pair of this host. Its String prints the key
// id, never the private key.
type SealKey struct {
	priv hpke.PrivateKey
	pub  []byte
	id   string
}

// Private returns the HPKE private key (for hpke.Open).
func (k *SealKey) Private() hpke.PrivateKey { return k.priv }

// Public returns the serialized public key (what heartbeats carry).
func (k *SealKey) Public() []byte { return append([]byte(nil), k.pub...) }

// ID is the key id a sealed envelope names (SealKeyID of the public key).
func (k *SealKey) ID() string { return k.id }

func (k *SealKey) String() string { return "hpke key " + k.id }

// SealKeyID is the id of an HPKE public key: "hpke:" and the unpadded
// base64url of the first 12 bytes of its SHA-256. Short enough for a
// header, long enough that two keys of one host never collide by chance.
func SealKeyID(pub []byte) string {
	sum := sha256.Sum256(pub)
	return "hpke:" + base64.RawURLEncoding.EncodeToString(sum[:12])
}

// ParseSealPublic decodes a serialized HPKE public key of SealKEM.
func ParseSealPublic(pub []byte) (hpke.PublicKey, error) {
	pk, err := SealKEM().NewPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("keys: not an %s public key: %w", SealKeyType, err)
	}
	return pk, nil
}

// FormatSealPublic is the .pub line of pub, without comment.
func FormatSealPublic(pub []byte) string {
	return SealKeyType + " " + base64.StdEncoding.EncodeToString(pub)
}

func newSealKey(priv hpke.PrivateKey) *SealKey {
	pub := priv.PublicKey().Bytes()
	return &SealKey{priv: priv, pub: pub, id: SealKeyID(pub)}
}

func generateSealKey() (*SealKey, error) {
	priv, err := SealKEM().GenerateKey()
	if err != nil {
		return nil, fmt.Errorf("keys: generating an HPKE key: %w", err)
	}
	return newSealKey(priv), nil
}

func marshalSealKey(k *SealKey) ([]byte, error) {
	raw, err := k.priv.Bytes()
	if err != nil {
		return nil, fmt.Errorf("keys: encoding the HPKE key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: sealPEMType, Headers: map[string]string{"Suite": SealKeyType}, Bytes: raw}), nil
}

// loadSealKey reads an HPKE private key file, refusing one group or
// others can read (as load does for the host key).
func loadSealKey(path string) (*SealKey, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxKeyFile {
		return nil, fmt.Errorf("keys: %s is not an HPKE key file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("keys: %s is mode %04o; run chmod 600 %s", path, perm, path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	b, _ := pem.Decode(data)
	if b == nil || b.Type != sealPEMType || b.Headers["Suite"] != SealKeyType {
		return nil, fmt.Errorf("keys: %s is not a %s private key", path, SealKeyType)
	}
	priv, err := SealKEM().NewPrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("keys: %s: %w", path, err)
	}
	return newSealKey(priv), nil
}

// LoadOrCreateSealKey loads stateDir/host_hpke or, absent, generates it
// (mode 0600) and its .pub (0644). Two processes racing end up with one key.
func LoadOrCreateSealKey(stateDir, host string) (k *SealKey, created bool, err error) {
	path := filepath.Join(stateDir, SealKeyFile)
	k, err = loadSealKey(path)
	if errors.Is(err, fs.ErrNotExist) {
		if err := mkdirPrivate(stateDir); err != nil {
			return nil, false, err
		}
		nk, err := generateSealKey()
		if err != nil {
			return nil, false, err
		}
		data, err := marshalSealKey(nk)
		if err != nil {
			return nil, false, err
		}
		if created, err = createExclusive(path, data, 0o600); err != nil {
			return nil, false, err
		}
		if k = nk; !created {
			if k, err = loadSealKey(path); err != nil {
				return nil, false, err
			}
		}
	} else if err != nil {
		return nil, false, err
	}
	line := FormatSealPublic(k.pub) + " herdbridge@" + sanitizeComment(host) + "\n"
	if cur, _ := os.ReadFile(filepath.Join(stateDir, SealPubFile)); string(cur) != line {
		if err := writeFileAtomic(filepath.Join(stateDir, SealPubFile), []byte(line), 0o644); err != nil {
			return nil, false, err
		}
	}
	return k, created, nil
}

// RotateSealKey moves the current HPKE key to
// retired_keys/host_hpke.<unix seconds>, generates a new one, and deletes
// retired HPKE keys older than SealRetention. Messages sealed to the old
// key before peers saw the new one still open (SealKeys keeps the retired
// keys) until the window ends.
func RotateSealKey(stateDir, host string, now time.Time) (*SealKey, error) {
	path := filepath.Join(stateDir, SealKeyFile)
	if _, err := loadSealKey(path); err != nil {
		return nil, err
	}
	old, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	nk, err := generateSealKey()
	if err != nil {
		return nil, err
	}
	data, err := marshalSealKey(nk)
	if err != nil {
		return nil, err
	}
	retired := filepath.Join(stateDir, RetiredDir)
	if err := mkdirPrivate(retired); err != nil {
		return nil, err
	}
	if err := retireCopy(retired, SealKeyFile, old, now); err != nil {
		return nil, err
	}
	if err := writeFileAtomic(path, data, 0o600); err != nil {
		return nil, err
	}
	line := FormatSealPublic(nk.pub) + " herdbridge@" + sanitizeComment(host) + "\n"
	if err := writeFileAtomic(filepath.Join(stateDir, SealPubFile), []byte(line), 0o644); err != nil {
		return nil, err
	}
	pruneRetiredSealKeys(retired, now)
	return nk, nil
}

// retiredSealAge parses retired_keys/host_hpke.<unix>[.<n>]: when it was
// retired; ok false for any other name.
func retiredSealAge(name string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(name, SealKeyFile+".")
	if !ok || rest == "" {
		return time.Time{}, false
	}
	secs, _, _ := strings.Cut(rest, ".")
	n, err := strconv.ParseInt(secs, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}, false
	}
	return time.Unix(n, 0), true
}

// pruneRetiredSealKeys deletes the retired HPKE keys past SealRetention.
func pruneRetiredSealKeys(dir string, now time.Time) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if at, ok := retiredSealAge(e.Name()); ok && now.Sub(at) > SealRetention {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
