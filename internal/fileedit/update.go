// Package fileedit applies one edit to one file the way herdbridge's
// commands change a person's files (client configs, the service unit):
// atomically, keeping an existing file's mode, following a symlink to its
// target, and saying what it did — or, for --print, showing the change as
// a unified diff and writing nothing.
package fileedit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Edit maps a file's contents (nil when it does not exist) to its new
// contents.
type Edit func([]byte) ([]byte, error)

// Update rewrites path with edit(old contents) — atomically (a temp
// file in the same directory, synced, renamed over it), keeping an existing
// file's mode and following a symlink to its target — and says what it did.
// mode is a new file's.
func Update(path string, mode fs.FileMode, edit Edit, stdout io.Writer) error {
	if p, err := filepath.EvalSymlinks(path); err == nil {
		path = p
	}
	if p, err := filepath.Abs(path); err == nil {
		path = p
	}
	old, err := os.ReadFile(path)
	existed := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	data, err := edit(old)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if existed && bytes.Equal(old, data) {
		fmt.Fprintf(stdout, "unchanged %s\n", path)
		return nil
	}
	if err := replace(path, mode, data); err != nil {
		return err
	}
	verb := "wrote"
	if existed {
		verb = "updated"
	}
	fmt.Fprintf(stdout, "%s %s\n", verb, path)
	return nil
}

// replace puts data at path through a synced temp file renamed over it, so
// a reader sees the old file or the new, never a part.
func replace(path string, mode fs.FileMode, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
