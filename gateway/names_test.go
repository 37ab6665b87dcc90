package gateway_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/herdr/herdrtest"
)

func TestDeriveName(t *testing.T) {
	long := strings.Repeat("x", 80)
	for _, c := range []struct{ agent, cwd, pane, want string }{
		{"reviewer", "/src/repo", "w1:p2", "reviewer"},
		{"", "/src/repo", "w1:p2", "repo-w1-p2"},
		{"", "/src/my repo", "w1:p2", "my-repo-w1-p2"},
		{"", "/src/.hidden", "w3:p10", "hidden-w3-p10"},
		{"@@", "/", "w1:p2", "agent-w1-p2"},
		{"", "/src/" + long, "w1:p2", strings.Repeat("x", 58) + "-w1-p2"},
		{"", "/src/répo", "w1:p2", "r-po-w1-p2"},
	} {
		got := gateway.DeriveName(c.agent, c.cwd, c.pane)
		if got != c.want || !bridge.ValidName(got) {
			t.Errorf("DeriveName(%q, %q, %q) = %q, want %q (valid %v)", c.agent, c.cwd, c.pane, got, c.want, bridge.ValidName(got))
		}
	}
}

// TestDefaultNameInHerdr: in a pane the name comes from herdr's agent
// name, else from the directory and pane id; outside herdr there is none.
func TestDefaultNameInHerdr(t *testing.T) {
	fake := herdrtest.New(t)
	named := fake.AddAgent(herdrtest.PaneOptions{Name: "reviewer"})
	plain := fake.AddPane(herdrtest.PaneOptions{})
	t.Setenv("HERDR_SOCKET_PATH", fake.SocketPath())
	t.Setenv("HERDR_ENV", "1")
	ctx := context.Background()

	t.Setenv("HERDR_PANE_ID", named)
	if n, err := gateway.DefaultName(ctx); err != nil || n != "reviewer" {
		t.Fatalf("agent pane: %q, %v", n, err)
	}
	t.Chdir(t.TempDir())
	t.Setenv("HERDR_PANE_ID", plain)
	n, err := gateway.DefaultName(ctx)
	cwd, _ := filepath.Abs(".")
	if want := gateway.DeriveName("", cwd, plain); err != nil || n != want || !strings.HasSuffix(n, strings.ReplaceAll(plain, ":", "-")) {
		t.Fatalf("shell pane: %q, %v; want %q", n, err, want)
	}
	t.Setenv("HERDR_SOCKET_PATH", filepath.Join(t.TempDir(), "none.sock")) // herdr gone: still a name
	if n2, err := gateway.DefaultName(ctx); err != nil || n2 != n {
		t.Fatalf("herdr unreachable: %q, %v", n2, err)
	}

	t.Setenv("HERDR_ENV", "")
	if _, err := gateway.DefaultName(ctx); !errors.Is(err, gateway.ErrNoName) || !strings.Contains(err.Error(), "--name is required") {
		t.Fatalf("outside herdr: %v", err)
	}
}
