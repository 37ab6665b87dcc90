package keys

import (
	"fmt"
	"os"
	"path/filepath"
)

// writeFileAtomic replaces path with data: a temporary file in the same
// directory is written, chmod'ed to perm (explicitly, so the umask does not
// matter), fsync'ed and renamed over path, then the directory is fsync'ed.
// Readers see the old content or the new, never a part.
func writeFileAtomic(path string, data []byte, perm os.FileMode) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp*")
	if err != nil {
		return fmt.Errorf("keys: writing %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err = f.Chmod(perm); err != nil {
		return fmt.Errorf("keys: writing %s: %w", path, err)
	}
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("keys: writing %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("keys: writing %s: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("keys: writing %s: %w", path, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("keys: writing %s: %w", path, err)
	}
	syncDir(dir)
	return nil
}

// syncDir makes a rename in dir durable. Errors are ignored: some file
// systems do not support fsync on a directory, and the rename is done.
func syncDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	d.Sync()
	d.Close()
}

// mkdirPrivate creates dir (and parents) if absent and makes dir itself
// mode 0700 when this call created it.
func mkdirPrivate(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("keys: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("keys: %w", err)
	}
	return nil
}
