package keys

import (
	"crypto/ed25519"
	"errors"
	"sort"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

func FuzzParseTrust(f *testing.F) {
	a1, _ := testKey(1)
	a2, _ := testKey(2)
	k1, k2 := FormatPublicKey(a1), FormatPublicKey(a2)
	for _, s := range []string{
		"",
		"\n\n",
		"# comment only\n",
		"hostA " + k1 + "\n",
		"hostA " + k1 + " a comment\r\nhostA " + k2 + "\n",
		"hostA " + k1 + "\nhostA " + k1 + "\n",
		trustHeader + "b.h_1-x " + k1 + "\n   # x\n\thostC " + k2,
		"hostA\n",
		k1 + "\n",
		"-bad " + k1,
		"hostA ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ\n",
		"hostA ssh-ed25519 AAAA\n",
		"hostA ssh-ed25519 " + strings.Fields(k1)[1][:20] + "\n",
		"hostA ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIP//\n",
		"hostA\x00 " + k1,
		"hostA " + k1 + "\x00trailing",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		m, err := ParseTrust(strings.NewReader(in))
		if err != nil {
			var te *TrustError
			if !errors.As(err, &te) {
				t.Fatalf("error is not a *TrustError: %v", err)
			}
			if lines := strings.Count(in, "\n") + 1; te.Line < 1 || te.Line > lines {
				t.Fatalf("error names line %d of %d", te.Line, lines)
			}
			return
		}
		// Re-marshal and re-parse: the same hosts with the same keys in order.
		hosts := make([]string, 0, len(m))
		for h, ks := range m {
			if err := CheckHost(h); err != nil {
				t.Fatalf("accepted %v", err)
			}
			for _, k := range ks {
				if len(k) != ed25519.PublicKeySize {
					t.Fatalf("host %q: key of %d bytes", h, len(k))
				}
			}
			hosts = append(hosts, h)
		}
		sort.Strings(hosts)
		var b strings.Builder
		for _, h := range hosts {
			for _, k := range m[h] {
				b.WriteString(h + " " + FormatPublicKey(k) + "\n")
			}
		}
		again, err := ParseTrust(strings.NewReader(b.String()))
		if err != nil {
			t.Fatalf("re-parse of\n%s: %v", b.String(), err)
		}
		if len(again) != len(m) {
			t.Fatalf("re-parse: %d hosts, want %d", len(again), len(m))
		}
		for h, ks := range m {
			if len(again[h]) != len(ks) {
				t.Fatalf("host %q: %d keys after re-parse, want %d", h, len(again[h]), len(ks))
			}
			for i := range ks {
				if !again[h][i].Equal(ks[i]) {
					t.Fatalf("host %q key %d changed on re-parse", h, i)
				}
			}
		}
	})
}

func FuzzParsePublicKey(f *testing.F) {
	a1, _ := testKey(1)
	k1 := FormatPublicKey(a1)
	for _, s := range []string{
		k1,
		k1 + " herdbridge@hostA",
		"  " + k1 + " comment with spaces\r\n",
		"",
		"ssh-ed25519",
		"ssh-ed25519 AAAA",
		"ssh-ed25519 " + strings.Fields(k1)[1][:30],
		"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIP//",
		"ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ==",
		"ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTY=",
		"hostA " + k1,
		"ssh-ed25519 !!!",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		pub, err := ParsePublicKey(in)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "keys: ") {
				t.Fatalf("error without package prefix: %v", err)
			}
			return
		}
		if len(pub) != ed25519.PublicKeySize {
			t.Fatalf("key of %d bytes", len(pub))
		}
		again, err := ParsePublicKey(FormatPublicKey(pub))
		if err != nil || !again.Equal(pub) {
			t.Fatalf("re-parse of %q: %v, %v", FormatPublicKey(pub), again, err)
		}
		spk, err := ssh.NewPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		if Fingerprint(pub) != ssh.FingerprintSHA256(spk) {
			t.Fatalf("Fingerprint %s, ssh says %s", Fingerprint(pub), ssh.FingerprintSHA256(spk))
		}
	})
}
