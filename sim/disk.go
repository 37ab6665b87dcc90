package sim

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
)

// DiskFaults gives each gateway a state directory whose disk can fill up.
// The tmpfs one needs the right to mount (root); the integrator can wire
// another (say, the store's own ENOSPC fault hook) behind the same three
// methods.
type DiskFaults interface {
	// Dir is host's state directory, created on first use.
	Dir(host string) (string, error)
	// Fill makes every later write in host's directory fail with ENOSPC.
	Fill(host string) error
	// Free undoes Fill.
	Free(host string) error
	// Close releases every directory.
	Close()
}

// tmpfsDisks mounts a small tmpfs per host and fills it with a filler file.
type tmpfsDisks struct {
	base string
	mu   sync.Mutex
	dirs map[string]string
}

// tmpfsSize bounds one gateway's state directory: far above what a
// schedule writes, small enough to fill in a moment.
const tmpfsSize = "64m"

// NewTmpfsDisks returns tmpfs-backed state directories under base, or an
// error saying why they are not available here (not root, no mount).
func NewTmpfsDisks(base string) (DiskFaults, error) {
	d := &tmpfsDisks{base: base, dirs: map[string]string{}}
	probe := filepath.Join(base, "probe")
	if err := d.mount(probe); err != nil {
		return nil, err
	}
	_ = unmount(probe)
	return d, nil
}

func (d *tmpfsDisks) mount(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+tmpfsSize+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("sim: cannot mount a tmpfs for disk-full faults (%v: %s); run as root, or leave out the disk fault kind", err, out)
	}
	return nil
}

func unmount(dir string) error {
	if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("sim: umount %s: %v: %s", dir, err, out)
	}
	return nil
}

func (d *tmpfsDisks) Dir(host string) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if dir, ok := d.dirs[host]; ok {
		return dir, nil
	}
	dir := filepath.Join(d.base, host)
	if err := d.mount(dir); err != nil {
		return "", err
	}
	d.dirs[host] = dir
	return dir, nil
}

// Fill writes a filler file until the tmpfs has no room left.
func (d *tmpfsDisks) Fill(host string) error {
	dir, err := d.Dir(host)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, "filler"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			return err
		}
	}
	for small := 4096; small > 0; small /= 2 { // the last pages, too
		for {
			if _, err := f.Write(buf[:small]); err != nil {
				break
			}
		}
	}
	return nil
}

func (d *tmpfsDisks) Free(host string) error {
	dir, err := d.Dir(host)
	if err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(dir, "filler")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func (d *tmpfsDisks) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for host, dir := range d.dirs {
		_ = unmount(dir)
		delete(d.dirs, host)
	}
}

// plainDisks are ordinary directories: Fill is refused (the disk kind is
// left out of runs that use them).
type plainDisks struct{ base string }

func (p plainDisks) Dir(host string) (string, error) {
	dir := filepath.Join(p.base, host)
	return dir, os.MkdirAll(dir, 0o700)
}
func (plainDisks) Fill(string) error { return errors.New("sim: this run has no disk that can fill up") }
func (plainDisks) Free(string) error { return nil }
func (plainDisks) Close()            {}

// PlainDisks are ordinary directories under base, which never fill up.
func PlainDisks(base string) DiskFaults { return plainDisks{base: base} }
