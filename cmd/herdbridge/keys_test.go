package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/herdbridge/herdbridge/keys"
)

// keysCmd runs `herdbridge keys args…` in-process.
func keysCmd(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	err = run(context.Background(), append([]string{"keys"}, args...), nil, &out, &errb)
	return out.String(), errb.String(), err
}

func keysMust(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	out, errs, err := keysCmd(t, args...)
	if err != nil {
		t.Fatalf("keys %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, out, errs)
	}
	return out, errs
}

func TestKeysInitIdempotent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	out1, _ := keysMust(t, "init", "--state-dir", dir, "--host-id", "hostA")
	if !strings.HasPrefix(out1, "created host key "+filepath.Join(dir, keys.KeyFile)+"\n") {
		t.Errorf("first init:\n%s", out1)
	}
	out2, _ := keysMust(t, "--state-dir", dir, "init", "--host-id", "hostA")
	if !strings.HasPrefix(out2, "host key already exists: ") {
		t.Errorf("second init:\n%s", out2)
	}
	line1, line2 := strings.Split(out1, "\n")[2], strings.Split(out2, "\n")[2]
	if line1 != line2 || !strings.HasPrefix(line1, "ssh-ed25519 AAAA") || !strings.HasSuffix(line1, " herdbridge@hostA") {
		t.Errorf("init printed %q then %q", line1, line2)
	}
	if !strings.Contains(out1, "fingerprint SHA256:") || !strings.Contains(out1, "herdbridge keys trust hostA '"+line1+"'") {
		t.Errorf("init output lacks the fingerprint or the trust command:\n%s", out1)
	}
	fi, err := os.Stat(filepath.Join(dir, keys.KeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v, %v", fi, err)
	}
}

func TestKeysShowTrustAcrossHosts(t *testing.T) {
	dirA, dirB := t.TempDir(), t.TempDir()
	keysMust(t, "init", "--state-dir", dirA, "--host-id", "hostA")
	keysMust(t, "init", "--state-dir", dirB, "--host-id", "hostB")

	showA, infoA := keysMust(t, "show", "--state-dir", dirA)
	if strings.Count(showA, "\n") != 1 || !strings.HasPrefix(showA, "ssh-ed25519 ") {
		t.Fatalf("show stdout is not exactly one key line: %q", showA)
	}
	if !strings.Contains(infoA, "fingerprint SHA256:") || !strings.Contains(infoA, "no trusted hosts yet") {
		t.Errorf("show stderr:\n%s", infoA)
	}
	lineA := strings.TrimSuffix(showA, "\n")

	// keys trust hostA "$(herdbridge keys show)", flags after the key.
	out, _ := keysMust(t, "trust", "hostA", lineA, "--state-dir", dirB)
	pubA, _ := keys.ParsePublicKey(lineA)
	want := "trusted hostA (" + keys.Fingerprint(pubA) + "); a running gateway picks this up within a few seconds\n"
	if out != want {
		t.Errorf("trust printed %q, want %q", out, want)
	}
	// Unquoted: the key's fields as separate arguments; flags first.
	out, _ = keysMust(t, append([]string{"--state-dir", dirB, "trust", "hostA"}, strings.Fields(lineA)...)...)
	if !strings.Contains(out, "already trusted") {
		t.Errorf("second trust printed %q", out)
	}
	data, _ := os.ReadFile(filepath.Join(dirB, keys.TrustFile))
	if n := strings.Count(string(data), "hostA ssh-ed25519 "); n != 1 {
		t.Errorf("trust file lists hostA %d times:\n%s", n, data)
	}

	// Host B's ring now verifies host A's signatures.
	kA, err := keys.Load(filepath.Join(dirA, keys.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	ring, err := keys.NewRing(dirB, "hostB", nil)
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("hello from A")
	if err := ring.Verify("hostA", msg, kA.Sign(msg)); err != nil {
		t.Errorf("B verifies A: %v", err)
	}

	// show --all puts everything on stdout.
	all, info := keysMust(t, "show", "--all", "--state-dir", dirB)
	if info != "" || !strings.Contains(all, "trusted hosts (") || !strings.Contains(all, "hostA") ||
		!strings.Contains(all, keys.Fingerprint(pubA)) {
		t.Errorf("show --all stdout:\n%s\nstderr:\n%s", all, info)
	}
	show, info := keysMust(t, "show", "--state-dir", dirB)
	if strings.Count(show, "\n") != 1 || !strings.Contains(info, keys.Fingerprint(pubA)) {
		t.Errorf("show stdout %q, stderr:\n%s", show, info)
	}

	// Trusting one's own key under another host's name is noted.
	lineB, _ := keysMust(t, "show", "--state-dir", dirB)
	_, note := keysMust(t, "trust", "hostC", lineB, "--state-dir", dirB, "--host-id", "hostB")
	if !strings.Contains(note, "this host's own key") {
		t.Errorf("no note when trusting the own key for hostC: %q", note)
	}
}

func TestKeysRevoke(t *testing.T) {
	dirA, dirB := t.TempDir(), t.TempDir()
	keysMust(t, "init", "--state-dir", dirA, "--host-id", "hostA")
	lineA, _ := keysMust(t, "show", "--state-dir", dirA)
	lineA = strings.TrimSpace(lineA)
	keysMust(t, "trust", "hostA", lineA, "--state-dir", dirB)
	keysMust(t, "rotate", "--state-dir", dirA, "--host-id", "hostA")
	newA, _ := keysMust(t, "show", "--state-dir", dirA)
	keysMust(t, "trust", "hostA", strings.TrimSpace(newA), "--state-dir", dirB)

	oldPub, _ := keys.ParsePublicKey(lineA)
	out, _ := keysMust(t, "revoke", "hostA", lineA, "--state-dir", dirB)
	if !strings.Contains(out, "revoked hostA: removed 1 line(s) for "+keys.Fingerprint(oldPub)) || !strings.Contains(out, "still has 1 trusted key") {
		t.Errorf("revoke printed:\n%s", out)
	}
	if _, _, err := keysCmd(t, "revoke", "hostA", lineA, "--state-dir", dirB); err == nil || !strings.Contains(err.Error(), "nothing revoked") {
		t.Errorf("revoking a revoked key: %v", err)
	}
	out, _ = keysMust(t, "--state-dir", dirB, "revoke", "hostA")
	if !strings.Contains(out, "removed 1 line(s)") || !strings.Contains(out, "no trusted key left") {
		t.Errorf("revoke of the host printed:\n%s", out)
	}
	if _, _, err := keysCmd(t, "revoke", "hostA", "--state-dir", dirB); err == nil || !strings.Contains(err.Error(), `host "hostA" is not in`) {
		t.Errorf("revoking an unknown host: %v", err)
	}
}

func TestKeysRotate(t *testing.T) {
	dir := t.TempDir()
	keysMust(t, "init", "--state-dir", dir, "--host-id", "hostA")
	old, _ := keysMust(t, "show", "--state-dir", dir)
	old = strings.TrimSpace(old)
	out, _ := keysMust(t, "rotate", "--state-dir", dir, "--host-id", "hostA")
	cur, _ := keysMust(t, "show", "--state-dir", dir)
	cur = strings.TrimSpace(cur)
	if cur == old {
		t.Fatal("rotate kept the key")
	}
	for _, want := range []string{
		cur,
		"herdbridge keys trust hostA '" + cur + "'",
		"herdbridge keys revoke hostA '" + old + "'",
		"so this host's in-flight messages still verify",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("rotate output lacks %q:\n%s", want, out)
		}
	}
	retired, err := filepath.Glob(filepath.Join(dir, keys.RetiredDir, keys.KeyFile+".*"))
	if err != nil || len(retired) != 1 {
		t.Fatalf("retired keys: %v, %v", retired, err)
	}
	k, err := keys.Load(retired[0])
	oldPub, _ := keys.ParsePublicKey(old)
	if err != nil || !k.Public().Equal(oldPub) {
		t.Fatalf("retired key: %v, %v", k, err)
	}
	_, info := keysMust(t, "show", "--state-dir", dir)
	if !strings.Contains(info, "retired keys") || !strings.Contains(info, keys.Fingerprint(oldPub)) {
		t.Errorf("show does not list the retired key:\n%s", info)
	}
}

func TestKeysErrors(t *testing.T) {
	dir := t.TempDir()
	noKey := "no host key in " + dir + ": run `herdbridge keys init` (the gateway also creates one on first start)"
	lineA, _ := func() (string, string) {
		d := t.TempDir()
		keysMust(t, "init", "--state-dir", d, "--host-id", "hostA")
		return keysMust(t, "show", "--state-dir", d)
	}()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"show"}, noKey},
		{[]string{"rotate"}, noKey},
		{[]string{}, "keys needs a subcommand"},
		{[]string{"frobnicate"}, `unknown keys subcommand "frobnicate"`},
		{[]string{"init", "extra"}, `keys init takes no arguments, got "extra"`},
		{[]string{"trust", "hostA"}, "usage: herdbridge keys trust HOST KEY…"},
		{[]string{"revoke"}, "usage: herdbridge keys revoke HOST"},
		{[]string{"trust", "bad/host", lineA}, `host id "bad/host" is not valid`},
		{[]string{"trust", "hostA", "ssh-rsa", "AAAAB3NzaC1yc2EAAAADAQABAAABAQ"}, "ssh-rsa key; herdbridge host keys are Ed25519"},
		{[]string{"trust", "hostA", "hostA", lineA}, `expected "ssh-ed25519 AAAA…", got "hostA"`},
		{[]string{"trust", "hostA", "ssh-ed25519", "AAAA%"}, "not valid base64"},
	} {
		out, _, err := keysCmd(t, append(c.args, "--state-dir", dir)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("keys %v: err = %v, want %q", c.args, err, c.want)
		}
		if out != "" {
			t.Errorf("keys %v: stdout %q on error", c.args, out)
		}
	}

	// A key file others can read is refused, with the chmod to run.
	keysMust(t, "init", "--state-dir", dir, "--host-id", "hostA")
	path := filepath.Join(dir, keys.KeyFile)
	os.Chmod(path, 0o644)
	_, _, err := keysCmd(t, "show", "--state-dir", dir)
	if want := "keys: " + path + " is mode 0644; run chmod 600 " + path; err == nil || err.Error() != want {
		t.Errorf("show with an open key file: %v, want %q", err, want)
	}

	// A broken trust file: trust refuses and names the line.
	os.Chmod(path, 0o600)
	os.WriteFile(filepath.Join(dir, keys.TrustFile), []byte("# x\nhostB nonsense\n"), 0o600)
	if _, _, err := keysCmd(t, "trust", "hostA", lineA, "--state-dir", dir); err == nil || !strings.Contains(err.Error(), keys.TrustFile+" line 2: ") {
		t.Errorf("trust into a broken file: %v", err)
	}
}
