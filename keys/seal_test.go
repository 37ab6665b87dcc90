package keys_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/keys"
)

// TestSealKeyFiles: the key is created once, mode 0600, reloaded the same;
// a group-readable file is refused.
func TestSealKeyFiles(t *testing.T) {
	dir := t.TempDir()
	k, created, err := keys.LoadOrCreateSealKey(dir, "h1")
	if err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	fi, err := os.Stat(filepath.Join(dir, keys.SealKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode: %v %v", fi, err)
	}
	k2, created, err := keys.LoadOrCreateSealKey(dir, "h1")
	if err != nil || created || k2.ID() != k.ID() {
		t.Fatalf("reload: %v %v %s %s", created, err, k2.ID(), k.ID())
	}
	pub, err := os.ReadFile(filepath.Join(dir, keys.SealPubFile))
	if err != nil || string(pub[:len(keys.SealKeyType)]) != keys.SealKeyType {
		t.Fatalf("pub file: %q %v", pub, err)
	}
	os.Chmod(filepath.Join(dir, keys.SealKeyFile), 0o640)
	if _, _, err := keys.LoadOrCreateSealKey(dir, "h1"); err == nil {
		t.Fatal("a group-readable HPKE key loaded")
	}
}

// TestSealKeysRotation: after a rotation both keys open (by id) and the
// current one is the new; a retired key past SealRetention is dropped.
func TestSealKeysRotation(t *testing.T) {
	dir := t.TempDir()
	sk, err := keys.NewSealKeys(dir, "h1", nil)
	if err != nil {
		t.Fatal(err)
	}
	old := sk.Current().ID()
	nk, err := keys.RotateSealKey(dir, "h1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := sk.Reload(); err != nil {
		t.Fatal(err)
	}
	if sk.Current().ID() != nk.ID() || nk.ID() == old {
		t.Fatalf("current %s, new %s, old %s", sk.Current().ID(), nk.ID(), old)
	}
	for _, id := range []string{old, nk.ID()} {
		if _, ok := sk.Private(id); !ok {
			t.Fatalf("key %s not kept", id)
		}
	}
	// a second rotation far in the future: the first retired key is past the window
	later := time.Now().Add(keys.SealRetention + time.Hour)
	if _, err := keys.RotateSealKey(dir, "h1", later); err != nil {
		t.Fatal(err)
	}
	if err := sk.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, ok := sk.Private(old); ok {
		t.Fatalf("retired key %s kept past SealRetention", old)
	}
	if _, ok := sk.Private(nk.ID()); !ok {
		t.Fatalf("key %s, retired just now, dropped", nk.ID())
	}
}
