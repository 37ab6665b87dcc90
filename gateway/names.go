package gateway

import (
	"cmp"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/herdr"
)

// ErrNoName is DefaultName's error outside a herdr pane: there is nothing
// to derive a name from, so --name is required.
var ErrNoName = errors.New("--name is required outside a herdr pane (inside one it defaults to the pane's agent name, else <dir>-<pane id>)")

// InHerdr is the herdr pane this process runs in ($HERDR_PANE_ID when
// $HERDR_ENV is 1), or "".
func InHerdr() string {
	if os.Getenv("HERDR_ENV") != "1" {
		return ""
	}
	return os.Getenv("HERDR_PANE_ID")
}

// DefaultName is the entity name of an agent that gave no --name: inside
// a herdr pane, the name herdr knows the pane's agent by (agent.get, one
// second at most), else <cwd basename>-<pane id>; sanitized to a valid
// name. Outside herdr it is ErrNoName.
func DefaultName(ctx context.Context) (string, error) {
	pane := InHerdr()
	if pane == "" {
		return "", ErrNoName
	}
	agent := ""
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if a, err := (&herdr.Client{Timeout: time.Second}).AgentGet(ctx, pane); err == nil {
		agent = a.Name
	}
	cwd, _ := os.Getwd()
	return DeriveName(agent, cwd, pane), nil
}

// SessionName is the name `herdbridge mcp` registers as: name (--name or
// $HERDBRIDGE_NAME), else inside a herdr pane its DefaultName, else
// defName (--default-name). The pane's name comes before defName: one
// .mcp.json is shared by many panes, and a shared default would merge
// them. With none of them, DefaultName's error says why.
func SessionName(ctx context.Context, name, defName string) (string, error) {
	if name == "" && InHerdr() != "" {
		if n, err := DefaultName(ctx); err == nil {
			name = n
		}
	}
	if name = cmp.Or(name, defName); name != "" {
		return name, nil
	}
	_, err := DefaultName(ctx)
	return "", err
}

// DeriveName is DefaultName's rule: agent if it makes a valid name, else
// <basename of cwd>-<pane>. What a name may not hold becomes '-'; a name is
// cut to 64 bytes.
func DeriveName(agent, cwd, pane string) string {
	if n := sanitizeName(agent); n != "" {
		return n
	}
	base := filepath.Base(cwd)
	if cwd == "" || base == "/" || base == "." {
		base = "agent"
	}
	p := sanitizeName(pane)
	b := sanitizeName(base)
	if b == "" {
		b = "agent"
	}
	if p == "" {
		return b
	}
	if len(b)+1+len(p) > 64 { // keep the pane id: it is what makes the name unique
		b = strings.TrimRight(b[:max(1, 64-1-len(p))], "-._")
	}
	return sanitizeName(b + "-" + p)
}

// sanitizeName maps s to a valid entity name ("" when nothing is left):
// runs of other characters become one '-', leading punctuation goes.
func sanitizeName(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range s {
		ok := r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
		if !ok {
			if !dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = true
			continue
		}
		if b.Len() == 0 && (r == '.' || r == '_' || r == '-') {
			continue
		}
		b.WriteRune(r)
		dash = r == '-'
	}
	out := b.String()
	if len(out) > 64 {
		out = out[:64]
	}
	out = strings.TrimRight(out, "-")
	if !bridge.ValidName(out) {
		return ""
	}
	return out
}
