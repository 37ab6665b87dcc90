package keys

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// SealPeersFile remembers the other hosts' HPKE public keys as their
// signed heartbeats published them: one "HOST hpke-mlkem768x25519 BASE64"
// per line, mode 0600. A gateway that restarts seals to a peer at once,
// before the peer's next heartbeat (without it a message sent in that
// window would go clear under seal auto). Only keys from heartbeats that
// verified under the trust file's Ed25519 key of the host are written, so
// the file is as trustworthy as the trust file (and bounded by it).
const SealPeersFile = "seal_peers"

// maxSealPeersFile bounds what ReadSealPeers reads (a line is ~1.7 KB).
const maxSealPeersFile = 4 << 20

// ReadSealPeers returns host → public key from stateDir's seal_peers; an
// absent file is empty. A line that does not parse is skipped: the key
// comes again with the host's next heartbeat.
func ReadSealPeers(stateDir string) (map[string][]byte, error) {
	path := filepath.Join(stateDir, SealPeersFile)
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string][]byte{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	if fi.Size() > maxSealPeersFile {
		return nil, fmt.Errorf("keys: %s is larger than %d bytes", path, maxSealPeersFile)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	out := map[string][]byte{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[1] != SealKeyType || hostProblem(f[0]) != "" {
			continue
		}
		pub, err := base64.StdEncoding.DecodeString(f[2])
		if err != nil {
			continue
		}
		if _, err := ParseSealPublic(pub); err == nil {
			out[f[0]] = pub
		}
	}
	return out, nil
}

// RememberSealPeer records host's current HPKE public key in stateDir's
// seal_peers (replacing the host's previous one), atomically.
func RememberSealPeer(stateDir, host string, pub []byte) error {
	if err := CheckHost(host); err != nil {
		return err
	}
	if _, err := ParseSealPublic(pub); err != nil {
		return err
	}
	m, err := ReadSealPeers(stateDir)
	if err != nil {
		return err
	}
	m[host] = pub
	hosts := make([]string, 0, len(m))
	for h := range m {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	var b strings.Builder
	b.WriteString("# herdbridge: the other hosts' HPKE keys from their signed heartbeats (sealed bodies); rewritten by the gateway\n")
	for _, h := range hosts {
		b.WriteString(h + " " + FormatSealPublic(m[h]) + "\n")
	}
	return writeFileAtomic(filepath.Join(stateDir, SealPeersFile), []byte(b.String()), 0o600)
}
