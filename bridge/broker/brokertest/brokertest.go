// Package brokertest gives integration tests the test broker that
// .ci/rmq.sh starts: its URL, and rabbitmqctl against its node. With CI set
// and no broker, tests fail: integration tests never skip in CI.
package brokertest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// URL is the test broker's AMQP URL (RMQ_URL, as rmq_start exports it).
func URL(t testing.TB) string {
	t.Helper()
	url := os.Getenv("RMQ_URL")
	if url == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("RMQ_URL is not set: CI must start a broker (.ci/rmq.sh) before the tests")
		}
		t.Skip("no broker: set RMQ_URL (source .ci/rmq.sh and run rmq_start) to run the broker tests")
	}
	return url
}

// CtlEnv is the environment rabbitmqctl needs to reach the test broker's
// node: this process's (rmq_start exports the node's variables) with HOME
// set to RMQ_DIR, where the node's Erlang cookie is. rmq.sh never changes
// the caller's HOME, so commands that talk to the node get it here.
func CtlEnv() []string {
	return append(os.Environ(), "HOME="+os.Getenv("RMQ_DIR"))
}

// Ctl runs rabbitmqctl against the test broker's node.
func Ctl(t testing.TB, args ...string) {
	t.Helper()
	if os.Getenv("RABBITMQ_NODENAME") == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("RABBITMQ_NODENAME is not set: CI must start the broker with .ci/rmq.sh")
		}
		t.Skip("no broker node environment (source .ci/rmq.sh and rmq_start)")
	}
	cmd := exec.Command("/usr/lib/rabbitmq/bin/rabbitmqctl", append([]string{"-q"}, args...)...)
	cmd.Env = CtlEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("rabbitmqctl %v: %v\n%s", args, err, out)
	}
}

// Private is a broker of the test's own, started with .ci/rmq.sh's
// recipe on a free loopback port, that the test may kill -9 and restart.
// A bash coprocess owns it: when the test process dies, bash reads EOF on
// its stdin and its EXIT trap stops the broker, so none is left behind.
type Private struct {
	URL string
	// Dir is the broker's RMQ_DIR (logs in Dir/log), removed when it stops.
	Dir string

	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
}

// StartPrivate starts a private broker (about 5 s) and stops it when the
// test ends. Without rabbitmq-server installed it skips, or fails in CI.
func StartPrivate(t testing.TB) *Private {
	t.Helper()
	return StartPrivateConf(t, "")
}

// StartPrivateConf is StartPrivate with extra rabbitmq.conf lines (the
// recipe's RMQ_CONF), e.g. a TLS listener and its ssl_options.
func StartPrivateConf(t testing.TB, conf string) *Private {
	t.Helper()
	if _, err := os.Stat("/usr/lib/rabbitmq/bin/rabbitmq-server"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("rabbitmq-server is not installed: CI must install Debian's rabbitmq-server")
		}
		t.Skip("rabbitmq-server is not installed (apt-get install rabbitmq-server)")
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "..", ".ci", "rmq.sh")
	cmd := exec.Command("bash", "--norc", "--noprofile")
	if conf != "" {
		cmd.Env = append(os.Environ(), "RMQ_CONF="+conf)
	}
	// The recipe exports the node's variables: keep them in bash, out of
	// this process. Its own stderr goes to the test log on failure.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &syncWriter{w: &stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Private{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	t.Cleanup(func() {
		_, _ = io.WriteString(stdin, "exit 0\n")
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	fmt.Fprintf(stdin, ". %q\ntrap rmq_stop EXIT\nstarted=\n", script)
	// the first free port of a range the CI broker and its neighbours do not use
	fmt.Fprint(stdin, `for port in 5699 5719 5739 5759 5799 5819; do
  if rmq_start "$port" >&2; then started=1; break; fi
done
if [ -n "$started" ]; then echo "URL $RMQ_URL"; echo "DIR $RMQ_DIR"; else echo "FAIL"; fi
`)
	line := p.line(t, 120*time.Second)
	if !strings.HasPrefix(line, "URL ") {
		t.Fatalf("private broker did not start (%q):\n%s", line, stderr.String())
	}
	p.URL = strings.TrimPrefix(line, "URL ")
	p.Dir = strings.TrimPrefix(p.line(t, 10*time.Second), "DIR ")
	return p
}

// CrashRestart kill -9s the broker's VM and starts it again on the same
// data directory; it returns once the AMQP port accepts.
func (p *Private) CrashRestart(t testing.TB) {
	t.Helper()
	fmt.Fprint(p.stdin, `if rmq_crash_restart >&2; then echo OK; else echo FAIL; fi`+"\n")
	if l := p.line(t, 120*time.Second); l != "OK" {
		t.Fatalf("broker crash-restart: %q", l)
	}
}

// Kill kill -9s the broker's VM without restarting it.
func (p *Private) Kill(t testing.TB) {
	t.Helper()
	fmt.Fprint(p.stdin, `kill -KILL "$RMQ_BEAM_PID"; wait "$RMQ_PID" 2>/dev/null; echo OK`+"\n")
	if l := p.line(t, 30*time.Second); l != "OK" {
		t.Fatalf("broker kill: %q", l)
	}
}

// Restart starts a killed broker again on the same data directory.
func (p *Private) Restart(t testing.TB) {
	t.Helper()
	fmt.Fprint(p.stdin, `if rmq_restart >&2; then echo OK; else echo FAIL; fi`+"\n")
	if l := p.line(t, 120*time.Second); l != "OK" {
		t.Fatalf("broker restart: %q", l)
	}
}

// Ctl runs rabbitmqctl against the private broker; args are passed as
// they are (each single-quoted for the shell, no quote allowed in them).
func (p *Private) Ctl(t testing.TB, args ...string) {
	t.Helper()
	quoted := make([]string, len(args))
	for i, a := range args {
		if strings.Contains(a, "'") {
			t.Fatalf("Ctl: %q has a quote", a)
		}
		quoted[i] = "'" + a + "'"
	}
	fmt.Fprintf(p.stdin, "if HOME=\"$RMQ_DIR\" /usr/lib/rabbitmq/bin/rabbitmqctl -q %s >&2; then echo OK; else echo FAIL; fi\n", strings.Join(quoted, " "))
	if l := p.line(t, 60*time.Second); l != "OK" {
		t.Fatalf("rabbitmqctl %v: %q", args, l)
	}
}

// LogTail is the last n lines of the broker's log files, for a failing
// test to show (read it before the test's cleanups stop the broker).
func (p *Private) LogTail(n int) string {
	files, _ := filepath.Glob(filepath.Join(p.Dir, "log", "*.log"))
	files = append(files, filepath.Join(p.Dir, "stdout.log"))
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		fmt.Fprintf(&b, "== %s\n%s\n", f, strings.Join(lines[max(0, len(lines)-n):], "\n"))
	}
	return b.String()
}

func (p *Private) line(t testing.TB, timeout time.Duration) string {
	t.Helper()
	ch := make(chan string, 1)
	go func() {
		if p.out.Scan() {
			ch <- p.out.Text()
		} else {
			ch <- "EOF"
		}
	}()
	select {
	case l := <-ch:
		return l
	case <-time.After(timeout):
		t.Fatalf("private broker: no answer in %v", timeout)
		return ""
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}
