package keys

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/crypto/ssh"

	"github.com/herdbridge/herdbridge/internal/testlog"
)

// testKey returns a deterministic key pair for seed n.
func testKey(n byte) (ed25519.PublicKey, ed25519.PrivateKey) {
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{n}, ed25519.SeedSize))
	return priv.Public().(ed25519.PublicKey), priv
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// needSSHKeygen returns ssh-keygen's path; without it the test skips,
// except under CI where it fails loudly.
func needSSHKeygen(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("ssh-keygen")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("ssh-keygen not on PATH (install openssh-client)")
		}
		t.Skip("ssh-keygen not on PATH")
	}
	return p
}

func sshKeygen(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(needSSHKeygen(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ssh-keygen %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func TestGenerateLoadRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	k, created, err := LoadOrCreate(dir, "hostA")
	if err != nil || !created {
		t.Fatalf("LoadOrCreate = %v, %v", created, err)
	}
	if m := mode(t, filepath.Join(dir, KeyFile)); m != 0o600 {
		t.Errorf("key mode %o, want 600", m)
	}
	if m := mode(t, filepath.Join(dir, PubFile)); m != 0o644 {
		t.Errorf("pub mode %o, want 644", m)
	}
	if m := mode(t, dir); m != 0o700 {
		t.Errorf("state dir mode %o, want 700", m)
	}
	line := k.AuthorizedLine()
	if !strings.HasPrefix(line, "ssh-ed25519 AAAA") || !strings.HasSuffix(line, " herdbridge@hostA") || strings.Contains(line, "\n") {
		t.Errorf("AuthorizedLine = %q", line)
	}
	pubFile, _ := os.ReadFile(filepath.Join(dir, PubFile))
	if string(pubFile) != line+"\n" {
		t.Errorf(".pub = %q, want %q", pubFile, line+"\n")
	}

	l, err := Load(filepath.Join(dir, KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if !l.Public().Equal(k.Public()) || l.AuthorizedLine() != line {
		t.Fatalf("Load: %s / %q, want %s / %q", l, l.AuthorizedLine(), k, line)
	}
	msg := []byte("envelope")
	if !ed25519.Verify(k.Public(), msg, l.Sign(msg)) {
		t.Fatal("signature of the loaded key does not verify under the generated public key")
	}

	again, created, err := LoadOrCreate(dir, "other-name")
	if err != nil || created || !again.Public().Equal(k.Public()) {
		t.Fatalf("second LoadOrCreate = %v, created %v, %v", again, created, err)
	}
	if again.AuthorizedLine() != line {
		t.Errorf("second LoadOrCreate comment changed: %q", again.AuthorizedLine())
	}

	pub, err := ParsePublicKey(line)
	if err != nil || !pub.Equal(k.Public()) {
		t.Fatalf("ParsePublicKey(AuthorizedLine) = %v, %v", pub, err)
	}
	spk, _ := ssh.NewPublicKey(k.Public())
	if got, want := Fingerprint(k.Public()), ssh.FingerprintSHA256(spk); got != want {
		t.Errorf("Fingerprint = %s, want %s", got, want)
	}
	for _, s := range []string{k.String(), fmt.Sprintf("%v %+v %#v", k, k, k)} {
		if !strings.Contains(s, "SHA256:") || strings.Contains(s, "PRIVATE") {
			t.Errorf("HostKey prints as %q", s)
		}
	}
}

func TestLoadOrCreateRewritesMissingPub(t *testing.T) {
	dir := t.TempDir()
	k, _, err := LoadOrCreate(dir, "hostA")
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, PubFile))
	if _, created, err := LoadOrCreate(dir, "hostA"); err != nil || created {
		t.Fatal(created, err)
	}
	b, err := os.ReadFile(filepath.Join(dir, PubFile))
	if err != nil || string(b) != k.AuthorizedLine()+"\n" {
		t.Fatalf(".pub = %q, %v", b, err)
	}
}

func TestLoadOrCreateRace(t *testing.T) {
	dir := t.TempDir()
	const n = 8
	var wg sync.WaitGroup
	res := make([]*HostKey, n)
	made := make([]bool, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], made[i], errs[i] = LoadOrCreate(dir, "hostA")
		}()
	}
	wg.Wait()
	created := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !res[i].Public().Equal(res[0].Public()) {
			t.Fatal("racing LoadOrCreate calls returned different keys")
		}
		if made[i] {
			created++
		}
	}
	if created != 1 {
		t.Fatalf("%d calls report created, want 1", created)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Errorf("state dir holds %d files, want key and .pub (temporary files left?)", len(ents))
	}
}

func TestLoadSSHKeygenEd25519(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "id_ed25519")
	sshKeygen(t, "-q", "-t", "ed25519", "-N", "", "-C", "alice@laptop", "-f", path)
	k, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	pubLine, err := os.ReadFile(path + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ParsePublicKey(string(pubLine))
	if err != nil {
		t.Fatal(err)
	}
	if !pub.Equal(k.Public()) {
		t.Fatal("the .pub ssh-keygen wrote parses to another key than the private key")
	}
	msg := []byte("signed by an ssh-keygen key")
	if !ed25519.Verify(pub, msg, k.Sign(msg)) {
		t.Fatal("signature does not verify")
	}
	if got := k.AuthorizedLine(); got != strings.TrimSpace(string(pubLine)) {
		t.Errorf("AuthorizedLine = %q, want the .pub line %q", got, pubLine)
	}
	// ssh-keygen -l prints "256 SHA256:… comment (ED25519)".
	if f := strings.Fields(sshKeygen(t, "-l", "-f", path+".pub")); len(f) < 2 || f[1] != Fingerprint(pub) {
		t.Errorf("ssh-keygen -l says %v, Fingerprint says %s", f, Fingerprint(pub))
	}

	// The same key as a gateway state dir.
	state := t.TempDir()
	sshKeygen(t, "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", filepath.Join(state, KeyFile))
	hk, created, err := LoadOrCreate(state, "hostA")
	if err != nil || created {
		t.Fatal(created, err)
	}
	if !strings.HasPrefix(hk.AuthorizedLine(), "ssh-ed25519 ") {
		t.Error(hk.AuthorizedLine())
	}
}

func TestLoadRefusesOtherKeyTypes(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ typ, bits, want string }{
		{"rsa", "2048", "is an rsa key; herdbridge host keys are Ed25519 (ssh-keygen -t ed25519)"},
		{"ecdsa", "256", "is an ecdsa key; herdbridge host keys are Ed25519 (ssh-keygen -t ed25519)"},
	} {
		path := filepath.Join(dir, c.typ)
		sshKeygen(t, "-q", "-t", c.typ, "-b", c.bits, "-N", "", "-f", path)
		_, err := Load(path)
		if err == nil || err.Error() != "keys: "+path+" "+c.want {
			t.Errorf("%s: err = %v, want %q", c.typ, err, c.want)
		}
		pub, _ := os.ReadFile(path + ".pub")
		if _, err := ParsePublicKey(string(pub)); err == nil || !strings.Contains(err.Error(), "herdbridge host keys are Ed25519") {
			t.Errorf("%s .pub: ParsePublicKey err = %v", c.typ, err)
		}
	}
}

func TestLoadRefusesPassphrase(t *testing.T) {
	dir := t.TempDir()
	_, priv := testKey(1)
	block, err := ssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "enc")
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	paths := []string{path}
	if _, err := exec.LookPath("ssh-keygen"); err == nil {
		p := filepath.Join(dir, "enc-keygen")
		sshKeygen(t, "-q", "-t", "ed25519", "-a", "1", "-N", "correct horse", "-f", p)
		paths = append(paths, p)
	}
	for _, p := range paths {
		_, err := Load(p)
		if err == nil || !strings.Contains(err.Error(), "passphrase") || !strings.Contains(err.Error(), "ssh-keygen -p -N '' -f "+p) {
			t.Errorf("%s: err = %v", p, err)
		}
	}
}

func TestLoadRefusesOpenMode(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := LoadOrCreate(dir, "h"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, KeyFile)
	for _, m := range []os.FileMode{0o644, 0o640, 0o604} {
		os.Chmod(path, m)
		_, err := Load(path)
		want := fmt.Sprintf("keys: %s is mode %04o; run chmod 600 %s", path, m, path)
		if err == nil || err.Error() != want {
			t.Errorf("mode %o: err = %v, want %q", m, err, want)
		}
		if _, _, err := LoadOrCreate(dir, "h"); err == nil {
			t.Errorf("mode %o: LoadOrCreate accepted the key", m)
		}
	}
	os.Chmod(path, 0o400)
	if _, err := Load(path); err != nil {
		t.Errorf("mode 0400: %v", err)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(filepath.Join(dir, "absent")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("absent: %v", err)
	}
	junk := filepath.Join(dir, "junk")
	os.WriteFile(junk, []byte("not a key\n"), 0o600)
	if _, err := Load(junk); err == nil || !strings.Contains(err.Error(), "is not an OpenSSH private key") {
		t.Errorf("junk: %v", err)
	}
}

func TestParsePublicKeyErrors(t *testing.T) {
	pub, _ := testKey(1)
	good := FormatPublicKey(pub)
	b64 := strings.Fields(good)[1]
	for _, c := range []struct{ in, want string }{
		{"", "empty public key"},
		{"   \n", "empty public key"},
		{"ssh-ed25519", "is not a public key"},
		{"ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ", "ssh-rsa key; herdbridge host keys are Ed25519"},
		{"ecdsa-sha2-nistp256 AAAA", "ecdsa-sha2-nistp256 key; herdbridge host keys are Ed25519"},
		{"hostA " + good, `expected "ssh-ed25519 AAAA…", got "hostA"`},
		{"ssh-ed25519 !!!!", "not valid base64"},
		{"ssh-ed25519 " + b64[:len(b64)-8], "does not decode: ssh: short read"},
		{"ssh-ed25519 " + b64[:len(b64)-9], "not valid base64"},
		{"ssh-ed25519 AAAAB3NzaC1yc2EAAAADAQABAAABAQ==", "does not decode"},
	} {
		_, err := ParsePublicKey(c.in)
		if err == nil || !strings.HasPrefix(err.Error(), "keys: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParsePublicKey(%q) err = %v, want it to contain %q", c.in, err, c.want)
		}
	}
	for _, in := range []string{good, good + " a comment with spaces", "  " + good + "\r\n", "ssh-ed25519\t" + b64} {
		got, err := ParsePublicKey(in)
		if err != nil || !got.Equal(pub) {
			t.Errorf("ParsePublicKey(%q) = %v, %v", in, got, err)
		}
	}
}

func TestParseTrust(t *testing.T) {
	a1, _ := testKey(1)
	a2, _ := testKey(2)
	b1, _ := testKey(3)
	in := "# comment\n\n" +
		"hostA " + FormatPublicKey(a1) + " first\r\n" +
		"  hostA\t" + FormatPublicKey(a2) + "\n" +
		"hostA " + FormatPublicKey(a1) + " listed again\n" +
		"   # indented comment\n" +
		"b.host_2-x " + FormatPublicKey(b1)
	m, err := ParseTrust(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 2 || len(m["hostA"]) != 2 || !m["hostA"][0].Equal(a1) || !m["hostA"][1].Equal(a2) ||
		len(m["b.host_2-x"]) != 1 || !m["b.host_2-x"][0].Equal(b1) {
		t.Fatalf("ParseTrust = %v", m)
	}
	if m, err := ParseTrust(strings.NewReader("")); err != nil || len(m) != 0 {
		t.Fatalf("empty: %v, %v", m, err)
	}
}

func TestParseTrustErrors(t *testing.T) {
	a1, _ := testKey(1)
	k := FormatPublicKey(a1)
	for _, c := range []struct {
		in   string
		line int
		want string
	}{
		{"hostA\n", 1, "got 1 field(s)"},
		{"# ok\nhostA ssh-ed25519\n", 2, "got 2 field(s)"},
		{"\n\n" + k + "\n", 3, "the host id is missing"},
		{k + " comment\n", 1, "the host id is missing"},
		{"-host " + k + "\n", 1, `host id "-host" is not valid`},
		{"ho/st " + k + "\n", 1, `host id "ho/st" is not valid`},
		{strings.Repeat("h", 64) + " " + k + "\n", 1, "is not valid"},
		{"hostA ssh-rsa AAAAB3NzaC1yc2E\n", 1, "host hostA: ssh-rsa key; herdbridge host keys are Ed25519"},
		{"hostA " + k + "\nhostB ssh-ed25519 AAAA%%\n", 2, "host hostB: ssh-ed25519 key \"AAAA%%\"… is not valid base64"},
		{"hostA " + k + "\nhostB " + k[:len(k)-10] + "\n", 2, "not valid base64"},
		{"hostA sk-ssh-ed25519@openssh.com AAAA\n", 1, "sk-ssh-ed25519@openssh.com key"},
		{"hostA\xff " + k, 1, "is not valid"},
	} {
		_, err := ParseTrust(strings.NewReader(c.in))
		var te *TrustError
		if !errors.As(err, &te) {
			t.Errorf("ParseTrust(%q) err = %v, want a *TrustError", c.in, err)
			continue
		}
		prefix := fmt.Sprintf("keys: trust file line %d: ", c.line)
		if te.Line != c.line || !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseTrust(%q) err = %v, want %q…%q", c.in, err, prefix, c.want)
		}
	}
}

func TestCheckHost(t *testing.T) {
	for _, h := range []string{"a", "A9", "host-1.example_x", strings.Repeat("h", 63)} {
		if err := CheckHost(h); err != nil {
			t.Errorf("CheckHost(%q) = %v", h, err)
		}
	}
	for _, h := range []string{"", "-a", ".a", "_a", "a b", "a/b", "é", strings.Repeat("h", 64)} {
		if err := CheckHost(h); err == nil {
			t.Errorf("CheckHost(%q) = nil", h)
		}
	}
}

func TestTrustRevoke(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", TrustFile)
	a1, _ := testKey(1)
	a2, _ := testKey(2)
	b1, _ := testKey(3)

	if _, err := Revoke(path, "hostA", nil); !errors.Is(err, ErrUnknownHost) {
		t.Fatalf("Revoke on an absent file: %v", err)
	}
	for range 2 {
		if err := Trust(path, "hostA", a1); err != nil {
			t.Fatal(err)
		}
	}
	if m := mode(t, path); m != 0o600 {
		t.Errorf("trust file mode %o, want 600", m)
	}
	data, _ := os.ReadFile(path)
	if n := strings.Count(string(data), FormatPublicKey(a1)); n != 1 {
		t.Fatalf("key listed %d times after trusting it twice:\n%s", n, data)
	}
	if err := Trust(path, "hostA", a2); err != nil {
		t.Fatal(err)
	}
	if err := Trust(path, "hostB", b1); err != nil {
		t.Fatal(err)
	}
	if err := Trust(path, "bad host", b1); err == nil || !strings.Contains(err.Error(), "is not valid") {
		t.Errorf("Trust with a bad host id: %v", err)
	}
	if err := Trust(path, "hostB", ed25519.PublicKey{1, 2}); err == nil {
		t.Error("Trust with a short key succeeded")
	}
	m, err := ReadTrust(path)
	if err != nil || len(m["hostA"]) != 2 || len(m["hostB"]) != 1 {
		t.Fatalf("after Trust: %v, %v", m, err)
	}

	// A hand edit: comment and a line without a trailing newline survive.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	fmt.Fprintf(f, "# hostC is the CI box\nhostC %s ci", FormatPublicKey(b1))
	f.Close()
	os.Chmod(path, 0o640)
	if err := Trust(path, "hostD", a1); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, path); m != 0o640 {
		t.Errorf("Trust changed the file mode to %o", m)
	}

	n, err := Revoke(path, "hostA", a1)
	if err != nil || n != 1 {
		t.Fatalf("Revoke(hostA, a1) = %d, %v", n, err)
	}
	if _, err := Revoke(path, "hostA", a1); err == nil || errors.Is(err, ErrUnknownHost) ||
		!strings.Contains(err.Error(), Fingerprint(a1)) || !strings.Contains(err.Error(), Fingerprint(a2)) {
		t.Errorf("revoking a revoked key: %v", err)
	}
	if n, err := Revoke(path, "hostA", nil); err != nil || n != 1 {
		t.Fatalf("Revoke(hostA, nil) = %d, %v", n, err)
	}
	if _, err := Revoke(path, "hostA", nil); !errors.Is(err, ErrUnknownHost) || !strings.Contains(err.Error(), `host "hostA" is not in`) {
		t.Errorf("revoking an unknown host: %v", err)
	}
	if _, err := Revoke(path, "hostZ", a1); !errors.Is(err, ErrUnknownHost) {
		t.Errorf("revoking a key of an unknown host: %v", err)
	}
	data, _ = os.ReadFile(path)
	if !strings.Contains(string(data), "# hostC is the CI box\nhostC "+FormatPublicKey(b1)+" ci\n") {
		t.Errorf("hand edits not kept:\n%s", data)
	}
	m, err = ReadTrust(path)
	if err != nil || len(m) != 3 || m["hostA"] != nil {
		t.Fatalf("after Revoke: %v, %v", m, err)
	}
	if m := mode(t, path); m != 0o640 {
		t.Errorf("Revoke changed the file mode to %o", m)
	}

	// A broken file is not touched.
	os.WriteFile(path, append(data, "oops\n"...), 0o600)
	before, _ := os.ReadFile(path)
	var te *TrustError
	if err := Trust(path, "hostE", a1); !errors.As(err, &te) || te.Path != path || !strings.Contains(err.Error(), path+" line ") {
		t.Errorf("Trust into a broken file: %v", err)
	}
	if _, err := Revoke(path, "hostB", nil); !errors.As(err, &te) {
		t.Errorf("Revoke from a broken file: %v", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("a broken trust file was rewritten")
	}
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 1 {
		t.Errorf("temporary files left: %v", ents)
	}
}

// signer is a host signing with a key.
func sign(priv ed25519.PrivateKey, msg string) ([]byte, []byte) {
	return []byte(msg), ed25519.Sign(priv, []byte(msg))
}

func TestRingVerify(t *testing.T) {
	dir := t.TempDir()
	own, _, err := LoadOrCreate(dir, "hostA")
	if err != nil {
		t.Fatal(err)
	}
	b1, bpriv := testKey(3)
	_, stranger := testKey(9)
	if err := Trust(filepath.Join(dir, TrustFile), "hostB", b1); err != nil {
		t.Fatal(err)
	}
	r, err := NewRing(dir, "hostA", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	msg, sig := sign(bpriv, "from B")
	if err := r.Verify("hostB", msg, sig); err != nil {
		t.Errorf("B's message: %v", err)
	}
	hosts := r.Hosts()
	if len(hosts) != 2 || hosts["hostB"][0] != Fingerprint(b1) || hosts["hostA"][0] != own.Fingerprint() {
		t.Errorf("Hosts = %v", hosts)
	}
	ownMsg := []byte("from A, back through the broker")
	if err := r.Verify("hostA", ownMsg, own.Sign(ownMsg)); err != nil {
		t.Errorf("own message: %v", err)
	}
	if err := r.Verify("hostC", msg, sig); err != ErrUnknownHost {
		t.Errorf("unknown host: %v", err)
	}
	if err := r.Verify("hostA", msg, sig); err != ErrBadSignature {
		t.Errorf("B's message claimed by A: %v", err)
	}
	_, forged := sign(stranger, "from B")
	for name, s := range map[string][]byte{"forged": forged, "short": sig[:10], "empty": nil, "long": append(sig, 0)} {
		if err := r.Verify("hostB", msg, s); err != ErrBadSignature {
			t.Errorf("%s signature: %v", name, err)
		}
	}
	tampered := append([]byte(nil), msg...)
	tampered[0] ^= 1
	if err := r.Verify("hostB", tampered, sig); err != ErrBadSignature {
		t.Errorf("tampered message: %v", err)
	}
	if a := testing.AllocsPerRun(100, func() { r.Verify("hostB", msg, sig) }); a != 0 {
		t.Errorf("Verify allocates %v times per call", a)
	}
	// With several keys, the one that verified last is tried first.
	b2, b2priv := testKey(4)
	if err := Trust(filepath.Join(dir, TrustFile), "hostB", b2); err != nil {
		t.Fatal(err)
	}
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	msg2, sig2 := sign(b2priv, "from B, new key")
	for range 2 {
		if err := r.Verify("hostB", msg2, sig2); err != nil {
			t.Fatalf("second key: %v", err)
		}
		if err := r.Verify("hostB", msg, sig); err != nil {
			t.Fatalf("first key: %v", err)
		}
	}
	r.Verify("hostB", msg2, sig2)
	if a := testing.AllocsPerRun(100, func() { r.Verify("hostB", msg2, sig2) }); a != 0 {
		t.Errorf("Verify with the second of two keys allocates %v times per call", a)
	}

	// No trust file and no key yet: an empty ring.
	empty, err := NewRing(t.TempDir(), "hostA", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := empty.Verify("hostA", msg, sig); err != ErrUnknownHost {
		t.Errorf("empty ring: %v", err)
	}
	var zero Ring
	if err := zero.Verify("hostA", msg, sig); err != ErrUnknownHost {
		t.Errorf("zero Ring: %v", err)
	}
}

func TestRingRotation(t *testing.T) {
	dirA, dirB := t.TempDir(), t.TempDir()
	oldA, _, err := LoadOrCreate(dirA, "hostA")
	if err != nil {
		t.Fatal(err)
	}
	trustB := filepath.Join(dirB, TrustFile)
	if err := Trust(trustB, "hostA", oldA.Public()); err != nil {
		t.Fatal(err)
	}
	inFlight := []byte("signed before the rotation")
	oldSig := oldA.Sign(inFlight)

	newA, err := Rotate(dirA, "hostA")
	if err != nil {
		t.Fatal(err)
	}
	if newA.Public().Equal(oldA.Public()) {
		t.Fatal("Rotate kept the key")
	}
	cur, err := Load(filepath.Join(dirA, KeyFile))
	if err != nil || !cur.Public().Equal(newA.Public()) || cur.AuthorizedLine() != newA.AuthorizedLine() {
		t.Fatalf("current key after Rotate: %v, %v", cur, err)
	}
	retired, _ := os.ReadDir(filepath.Join(dirA, RetiredDir))
	if len(retired) != 1 || !isRetiredName(retired[0].Name()) {
		t.Fatalf("retired_keys = %v", retired)
	}
	rpath := filepath.Join(dirA, RetiredDir, retired[0].Name())
	if m := mode(t, filepath.Join(dirA, RetiredDir)); m != 0o700 {
		t.Errorf("retired dir mode %o", m)
	}
	if m := mode(t, rpath); m != 0o600 {
		t.Errorf("retired key mode %o", m)
	}
	if k, err := Load(rpath); err != nil || !k.Public().Equal(oldA.Public()) {
		t.Fatalf("retired key: %v, %v", k, err)
	}
	// A second rotation within the same second does not overwrite the first.
	if _, err := Rotate(dirA, "hostA"); err != nil {
		t.Fatal(err)
	}
	if retired, _ := os.ReadDir(filepath.Join(dirA, RetiredDir)); len(retired) != 2 {
		t.Fatalf("after two rotations retired_keys = %v", retired)
	}
	newest, _ := Load(filepath.Join(dirA, KeyFile))

	// Host A's own ring: own retired keys still verify own messages.
	ringA, err := NewRing(dirA, "hostA", nil)
	if err != nil {
		t.Fatal(err)
	}
	fresh := []byte("signed after the rotation")
	for _, c := range []struct {
		name     string
		msg, sig []byte
	}{{"old", inFlight, oldSig}, {"middle", fresh, newA.Sign(fresh)}, {"new", fresh, newest.Sign(fresh)}} {
		if err := ringA.Verify("hostA", c.msg, c.sig); err != nil {
			t.Errorf("host A's own ring, %s key: %v", c.name, err)
		}
	}
	if n := len(ringA.Hosts()["hostA"]); n != 3 {
		t.Errorf("host A's ring lists %d own keys, want 3", n)
	}

	// Host B trusts both keys while messages drain.
	if err := Trust(trustB, "hostA", newA.Public()); err != nil {
		t.Fatal(err)
	}
	ringB, err := NewRing(dirB, "hostB", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ringB.Verify("hostA", inFlight, oldSig); err != nil {
		t.Errorf("old key on B: %v", err)
	}
	if err := ringB.Verify("hostA", fresh, newA.Sign(fresh)); err != nil {
		t.Errorf("new key on B: %v", err)
	}
	// Then revokes the old one.
	if n, err := Revoke(trustB, "hostA", oldA.Public()); err != nil || n != 1 {
		t.Fatal(n, err)
	}
	if err := ringB.Reload(); err != nil {
		t.Fatal(err)
	}
	if err := ringB.Verify("hostA", inFlight, oldSig); err != ErrBadSignature {
		t.Errorf("revoked key on B: %v", err)
	}
	if err := ringB.Verify("hostA", fresh, newA.Sign(fresh)); err != nil {
		t.Errorf("new key on B after revoke: %v", err)
	}
}

func TestRotateWithoutKey(t *testing.T) {
	dir := t.TempDir()
	if _, err := Rotate(dir, "hostA"); err == nil || !strings.Contains(err.Error(), "herdbridge keys init") {
		t.Fatalf("Rotate without a key: %v", err)
	}
}

func TestRingReloadKeepsPreviousOnError(t *testing.T) {
	dir := t.TempDir()
	b1, bpriv := testKey(3)
	path := filepath.Join(dir, TrustFile)
	if err := Trust(path, "hostB", b1); err != nil {
		t.Fatal(err)
	}
	r, err := NewRing(dir, "hostA", nil)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	os.WriteFile(path, append(data, "hostC garbage\n"...), 0o600)
	var te *TrustError
	if err := r.Reload(); !errors.As(err, &te) || te.Line != 4 {
		t.Fatalf("Reload of a broken file: %v", err)
	}
	msg, sig := sign(bpriv, "m")
	if err := r.Verify("hostB", msg, sig); err != nil {
		t.Errorf("previous keys lost: %v", err)
	}
	if _, err := NewRing(dir, "hostA", nil); !errors.As(err, &te) {
		t.Errorf("NewRing on a broken file: %v", err)
	}
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestRingWatch(t *testing.T) {
	defer goleak.VerifyNone(t) // runs last: Watch has returned
	dir := t.TempDir()
	var logs testlog.Buffer
	r, err := NewRing(dir, "hostA", slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	const every = 20 * time.Millisecond
	go func() { defer close(done); r.Watch(ctx, every) }()
	defer func() { cancel(); <-done }()

	b1, bpriv := testKey(3)
	msg, sig := sign(bpriv, "m")
	path := filepath.Join(dir, TrustFile)

	// Within about two intervals (plus slack for a loaded machine).
	within := 2*every + 500*time.Millisecond
	if err := Trust(path, "hostB", b1); err != nil {
		t.Fatal(err)
	}
	eventually(t, within, "trusted key picked up", func() bool { return r.Verify("hostB", msg, sig) == nil })
	eventually(t, within, "reload logged", func() bool { return strings.Contains(logs.String(), "trust file reloaded") })

	// A broken edit: logged as an error with the line, previous keys stay.
	data, _ := os.ReadFile(path)
	os.WriteFile(path, append(data, "\nhostC ssh-ed25519 nope\n"...), 0o600)
	eventually(t, within, "error logged", func() bool { return strings.Contains(logs.String(), "level=ERROR") })
	if l := logs.String(); !strings.Contains(l, "line=5") {
		t.Errorf("error log does not name the line:\n%s", l)
	}
	if err := r.Verify("hostB", msg, sig); err != nil {
		t.Errorf("previous keys lost after a broken edit: %v", err)
	}

	// Fixed by revoking: hostB goes away.
	os.WriteFile(path, data, 0o600)
	if _, err := Revoke(path, "hostB", nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, within, "revocation picked up", func() bool { return r.Verify("hostB", msg, sig) == ErrUnknownHost })
	if n := strings.Count(logs.String(), "level=ERROR"); n != 1 {
		t.Errorf("%d error lines for one broken edit, want 1:\n%s", n, logs.String())
	}
}

func BenchmarkVerify(b *testing.B) {
	dir := b.TempDir()
	for i := range 3 {
		pub, _ := testKey(byte(10 + i))
		Trust(filepath.Join(dir, TrustFile), "hostB", pub)
	}
	pub, priv := testKey(3)
	Trust(filepath.Join(dir, TrustFile), "hostB", pub) // the last of four keys
	r, err := NewRing(dir, "hostA", nil)
	if err != nil {
		b.Fatal(err)
	}
	msg, sig := sign(priv, strings.Repeat("x", 512))
	// The first call finds the key; later ones try it first.
	b.ReportAllocs()
	for b.Loop() {
		if err := r.Verify("hostB", msg, sig); err != nil {
			b.Fatal(err)
		}
	}
}
