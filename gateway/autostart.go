package gateway

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// LogName is the log file, in the state dir, of a gateway EnsureRunning
// started.
const LogName = "gateway.log"

// StartOptions tune EnsureRunning.
type StartOptions struct {
	// NoStart: never start one; nothing answering is an error.
	NoStart bool
	// Notice gets the one line saying a gateway was started (nil: none).
	Notice io.Writer
	// Exe is the binary to run (default: this process' own, os.Executable).
	Exe string
	// Wait bounds how long it waits for the gateway to answer (default 10s).
	Wait time.Duration
}

// EnsureRunning makes sure a gateway answers on stateDir's admin socket.
// When none does, it starts `herdbridge gateway --state-dir stateDir` (the
// same binary; --listen $HERDBRIDGE_LISTEN when that is set) detached: its
// own session and process group, stdin from /dev/null, stdout and stderr
// appended to <stateDir>/gateway.log, so it outlives the caller and no
// terminal signal reaches it. Then it waits until the socket answers.
//
// Racing first starts (two agents' MCP servers launched at once) make
// exactly one gateway: callers take the state dir's start lock
// (<stateDir>/gateway.start.lock) in turn and look again for an answering
// gateway under it, so only the first starts one; and a gateway takes the
// state dir's store lock before it binds anything, so one started by hand
// meanwhile fails on the lock and exits.
func EnsureRunning(stateDir string, o StartOptions) error {
	if Answers(stateDir) {
		return nil
	}
	sock := filepath.Join(stateDir, SocketName)
	if o.NoStart {
		return fmt.Errorf("no gateway answers on %s and --no-start was given: start one with `herdbridge gateway --state-dir %s`, or drop --no-start to have it started", sock, stateDir)
	}
	if o.Wait <= 0 {
		o.Wait = 10 * time.Second
	}
	if abs, err := filepath.Abs(stateDir); err == nil {
		stateDir = abs // the gateway runs in it, not in the caller's directory
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return fmt.Errorf("starting a gateway: state dir %s: %w", stateDir, err)
	}
	unlock, err := lockStart(filepath.Join(stateDir, startLockName), time.Now().Add(o.Wait+5*time.Second))
	if err != nil {
		return fmt.Errorf("starting a gateway: lock %s: %w", filepath.Join(stateDir, startLockName), err)
	}
	defer unlock()
	if Answers(stateDir) { // another caller started it while we waited
		return nil
	}
	return start(stateDir, o)
}

const startLockName = "gateway.start.lock"

// start runs the gateway and waits for it to answer (start lock held).
func start(stateDir string, o StartOptions) error {
	sock := filepath.Join(stateDir, SocketName)
	exe := o.Exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return fmt.Errorf("starting a gateway: cannot find this binary: %w", err)
		}
	}
	logPath := filepath.Join(stateDir, LogName)
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("starting a gateway: %w", err)
	}
	defer logf.Close() // the child has its own copy
	fmt.Fprintf(logf, "--- %s: started by pid %d\n", time.Now().UTC().Format(time.RFC3339), os.Getpid())
	args := []string{"gateway", "--state-dir", stateDir}
	if l := os.Getenv("HERDBRIDGE_LISTEN"); l != "" {
		args = append(args, "--listen", l)
	}
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = logf, logf // stdin nil: /dev/null
	cmd.Dir = stateDir                  // not the caller's directory, which may go away
	cmd.SysProcAttr = detached()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting a gateway (%s): %w", exe, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }() // reaps a loser; a winner outlives us
	deadline := time.Now().Add(o.Wait)
	var exitErr error
	childGone := false
	for {
		if Answers(stateDir) {
			if !childGone && o.Notice != nil { // answering while ours runs: ours (the start lock)
				fmt.Fprintf(o.Notice, "herdbridge: started a gateway for %s (pid %d, log %s)\n", stateDir, cmd.Process.Pid, logPath)
			}
			return nil
		}
		if time.Now().After(deadline) {
			break
		}
		select {
		case exitErr = <-exited:
			childGone = true
			// failed (or lost to a gateway started by hand, which then
			// answers at once): a moment more, then report
			if d := time.Until(deadline); d > time.Second {
				deadline = time.Now().Add(time.Second)
			}
		case <-time.After(50 * time.Millisecond):
		}
	}
	why := fmt.Sprintf("it did not answer within %v", o.Wait)
	if childGone {
		why = fmt.Sprintf("it exited (%v)", exitErr)
	}
	return fmt.Errorf("no gateway answered on %s: started one (pid %d), but %s; see %s:\n%s", sock, cmd.Process.Pid, why, logPath, logTail(logPath, 5))
}

// logTail is the last n lines of the file at path, indented.
func logTail(path string, n int) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "  (" + err.Error() + ")"
	}
	lines := bytes.Split(bytes.TrimRight(raw, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("  ")
		b.Write(l)
		b.WriteByte('\n')
	}
	return strings.TrimRight(b.String(), "\n")
}
