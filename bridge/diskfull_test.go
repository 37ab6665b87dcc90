package bridge_test

// Idempotency under a full disk (issue 20, item 3): a send whose
// request_id cannot be made durable fails and sends nothing; one that
// answered confirmed is deduped by a retry after the disk is freed and the
// gateway restarted — 0 duplicates, every confirmed send delivered once.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/store"
)

// storeHarness is newHarness with the state file in storeDir (the
// transport stays on the test's temp dir: the worst case for request ids
// is a transport that still takes messages while the state file cannot
// record them).
func storeHarness(t *testing.T, storeDir string, mod func(*bridge.Config)) *harness {
	t.Helper()
	return dirsHarness(t, storeDir, t.TempDir(), mod)
}

// reopen is a whole gateway restart: the core stops, the state file is
// closed and opened again (its journal replayed), a new core starts.
func (h *harness) reopen() {
	h.t.Helper()
	h.reopenAfter(nil)
}

// reopenAfter is reopen with between(st), when set, run on the state file
// before the new core starts: what a crash left there.
func (h *harness) reopenAfter(between func(*store.Store)) {
	h.t.Helper()
	if err := h.c.Close(); err != nil {
		h.t.Fatalf("Close: %v", err)
	}
	h.c = nil
	path := h.st.Path()
	if err := h.st.Close(); err != nil {
		h.t.Logf("closing the state file: %v (what it could not commit stays journaled)", err)
	}
	st, err := store.Open(path, 0)
	if err != nil {
		h.t.Fatalf("store.Open after the restart: %v", err)
	}
	h.st, h.cfg.Store = st, st
	if between != nil {
		between(st)
	}
	h.start()
}

// mustRunOrSkip skips a test that cannot run here, with the reason — and
// fails it instead when CI is set: CI runs as root and must run it.
func mustRunOrSkip(t *testing.T, reason string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s (CI is set: this test must run there)", reason)
	}
	t.Skip(reason)
}

// tinyTmpfs mounts a tmpfs of size bytes on a new directory, unmounted when
// the test ends.
func tinyTmpfs(t *testing.T, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		mustRunOrSkip(t, "mounting a small tmpfs (a disk that can fill) needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput(); err != nil {
		mustRunOrSkip(t, fmt.Sprintf("cannot mount a tmpfs: %v: %s", err, strings.TrimSpace(string(out))))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fillDisk writes a file in dir until the file system refuses with ENOSPC,
// and returns the function that frees it.
func fillDisk(t *testing.T, dir string) (free func()) {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatalf("filler: %v", err)
	}
	chunk := make([]byte, 4096)
	for {
		if _, err = f.Write(chunk); err != nil {
			break
		}
	}
	_ = f.Close()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling %s: %v, want ENOSPC", dir, err)
	}
	return func() {
		if err := os.Remove(path); err != nil {
			t.Fatalf("freeing the disk: %v", err)
		}
	}
}

// diskFullTally is what a disk-full run did.
type diskFullTally struct {
	confirmed, refused, failed, duplicates, missing int
}

// sendThroughDiskFull sends n briefs with request ids while the disk is
// full (full: fill, returning the function that frees it), frees it,
// restarts the gateway, retries every id and drains the worker.
func sendThroughDiskFull(t *testing.T, h *harness, n int, full func() (free func())) diskFullTally {
	t.Helper()
	p, w := pair(h)
	req := func(i int) bridge.SendRequest {
		return bridge.SendRequest{Target: "w", Message: fmt.Sprintf("brief %d", i), RequestID: fmt.Sprintf("disk-%d", i)}
	}
	var tally diskFullTally
	firstID := map[int]string{}
	free := full()
	for i := range n {
		res, err := h.c.Send(context.Background(), p.GID, req(i), nil)
		switch {
		case err == nil && res.Status == bridge.StatusConfirmed:
			tally.confirmed++
			firstID[i] = res.MsgID
		case err != nil && isUserError(err) && strings.Contains(err.Error(), "nothing was sent"):
			tally.refused++
		case err != nil && errors.Is(err, syscall.ENOSPC):
			tally.failed++ // the transport's own file is full: not confirmed, and it says why
		default:
			t.Fatalf("send %d under a full disk: %+v, %v; want confirmed, or a tool error saying nothing was sent", i, res, err)
		}
	}
	free()
	h.reopen()
	for i := range n {
		res := h.send(p, req(i))
		// deduped, or — when the disk took the intent but not the
		// "published" mark — published again under the same msgId, which
		// the recipient drops as seen (counted below as duplicates if not)
		if id, ok := firstID[i]; ok && res.MsgID != id {
			t.Errorf("retry of confirmed send %d: %+v, want the first call's msgId %s", i, res, id)
		}
	}
	seen := map[string]int{}
	got := 0
	eventually(t, fmt.Sprintf("w drained %d briefs", n), func() bool {
		res := h.poll(w, bridge.PollRequest{Max: 500})
		for _, m := range res.Messages {
			seen[m.Body]++
			got++
		}
		return len(seen) == n
	})
	// whatever else was to come has come: the retries ended before the drain
	if res := h.poll(w, bridge.PollRequest{Max: 500}); len(res.Messages) > 0 {
		for _, m := range res.Messages {
			seen[m.Body]++
			got++
		}
	}
	tally.duplicates = got - len(seen)
	tally.missing = n - len(seen)
	return tally
}

// TestRequestIDDiskFullTmpfs: a real full disk under the state file.
func TestRequestIDDiskFullTmpfs(t *testing.T) {
	dir := tinyTmpfs(t, 1<<20)
	h := storeHarness(t, dir, nil)
	tally := sendThroughDiskFull(t, h, 200, func() func() { return fillDisk(t, dir) })
	t.Logf("disk full (tmpfs): %+v", tally)
	if tally.duplicates != 0 || tally.missing != 0 {
		t.Fatalf("%+v: want 0 duplicates and every brief delivered", tally)
	}
}

// TestRequestIDDiskFullTmpfsWholeStateDir: the transport's file shares the
// full disk too, as in a gateway's state dir. A gateway that has run a
// while has free pages in its transport's file (messages come and go), so
// the transport still takes messages when the disk is full: warmUp gives
// it those.
func TestRequestIDDiskFullTmpfsWholeStateDir(t *testing.T) {
	dir := tinyTmpfs(t, 2<<20)
	h := dirsHarness(t, dir, dir, nil)
	warmUp(t, h, 400)
	tally := sendThroughDiskFull(t, h, 200, func() func() { return fillDisk(t, dir) })
	t.Logf("disk full (tmpfs, whole state dir): %+v", tally)
	if tally.duplicates != 0 || tally.missing != 0 {
		t.Fatalf("%+v: want 0 duplicates and every brief delivered", tally)
	}
}

// warmUp sends n briefs of 1 KiB from "old" to "oldw" and drains them, leaving
// free pages in the transport's file.
func warmUp(t *testing.T, h *harness, n int) {
	t.Helper()
	from, to := h.reg("old", bridge.RolePrimary), h.reg("oldw", bridge.RoleWorker)
	body := strings.Repeat("x", 1024)
	for range n {
		h.send(from, bridge.SendRequest{Target: "oldw", Message: body})
	}
	got := 0
	eventually(t, fmt.Sprintf("oldw drained %d", n), func() bool {
		got += len(h.poll(to, bridge.PollRequest{Max: 500}).Messages)
		return got == n
	})
}

// TestRequestIDDiskFullHook: the same through the store's fault hook: with
// every write refused, every send is refused and none is confirmed.
func TestRequestIDDiskFullHook(t *testing.T) {
	h := storeHarness(t, t.TempDir(), nil)
	tally := sendThroughDiskFull(t, h, 50, func() func() {
		h.st.SetDiskFull(true)
		st := h.st
		return func() { st.SetDiskFull(false) }
	})
	t.Logf("disk full (hook): %+v", tally)
	if tally.duplicates != 0 || tally.missing != 0 || tally.confirmed != 0 {
		t.Fatalf("%+v: want every send refused, then 0 duplicates and every brief delivered", tally)
	}
}

// TestRequestIDDiskFullRefusesAskAndBroadcast: bridge_ask and
// bridge_broadcast with a request_id refuse under a full disk and publish
// nothing; with space back the same ids publish once.
func TestRequestIDDiskFullRefusesAskAndBroadcast(t *testing.T) {
	h := storeHarness(t, t.TempDir(), nil)
	p, w := pair(h)
	h.st.SetDiskFull(true)
	ask := bridge.AskRequest{Question: "which file?", Target: "p", RequestID: "ask-1", Wait: 10 * time.Millisecond}
	bc := bridge.BroadcastRequest{Message: "all hands", RequestID: "bc-1"}
	if _, err := h.c.Ask(context.Background(), w.GID, ask, nil); !isUserError(err) || !strings.Contains(err.Error(), "nothing was sent") {
		t.Fatalf("ask under a full disk: %v, want a tool error saying nothing was sent", err)
	}
	if _, err := h.c.Broadcast(context.Background(), p.GID, bc); !isUserError(err) || !strings.Contains(err.Error(), "nothing was sent") {
		t.Fatalf("broadcast under a full disk: %v, want a tool error saying nothing was sent", err)
	}
	if v, _ := h.view("p"); v.Held != 0 {
		t.Fatalf("p holds %d after the refused ask", v.Held)
	}
	h.st.SetDiskFull(false)
	first, err := h.c.Broadcast(context.Background(), p.GID, bc)
	if err != nil || first.Deduped {
		t.Fatalf("broadcast with space back: %+v, %v", first, err)
	}
	if again, err := h.c.Broadcast(context.Background(), p.GID, bc); err != nil || !again.Deduped || again.MsgID != first.MsgID {
		t.Fatalf("broadcast repeat: %+v, %v", again, err)
	}
	h.heldFor("w", 1)
}
