package herdr

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// Profile is a spawnable worker, defined in the gateway's configuration:
// either a herdr agent kind with args (started with agent.start in a new
// tab's shell) or an argv command (run directly in a new tab with
// layout.apply), plus cwd and env. Callers name a profile, never a command.
type Profile struct {
	Kind    string            `json:"kind,omitempty"`    // herdr agent kind: claude, codex, pi, …
	Args    []string          `json:"args,omitempty"`    // with Kind
	Command []string          `json:"command,omitempty"` // argv, instead of Kind
	Cwd     string            `json:"cwd,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Groups  []string          `json:"groups,omitempty"` // groups the worker joins
	// the profile's limits and what a spawn may choose (maxWorkers, roots,
	// repos, models, allowArgs): the bridge core enforces them
	bridge.ProfilePolicy
}

var agentNameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// Validate checks a profile from the configuration.
func (p Profile) Validate(name string) error {
	switch {
	case p.Kind == "" && len(p.Command) == 0:
		return fmt.Errorf("profile %q: set kind (a herdr agent kind) or command (argv)", name)
	case p.Kind != "" && len(p.Command) > 0:
		return fmt.Errorf("profile %q: set kind or command, not both", name)
	case len(p.Command) > 0 && p.Command[0] == "":
		return fmt.Errorf("profile %q: command[0] (the executable) is empty", name)
	case p.Cwd != "" && !filepath.IsAbs(p.Cwd):
		return fmt.Errorf("profile %q: cwd %q must be absolute", name, p.Cwd)
	}
	if err := p.ProfilePolicy.Validate(name); err != nil {
		return err
	}
	for k, v := range p.Env {
		if k == "" || containsAny(k, "=\x00") {
			return fmt.Errorf("profile %q: env key %q is not valid", name, k)
		}
		if containsAny(v, "\x00") { // herdr refuses it (invalid_env)
			return fmt.Errorf("profile %q: env value of %s contains a NUL byte", name, k)
		}
	}
	return nil
}

func containsAny(s, chars string) bool {
	for _, c := range chars {
		for _, r := range s {
			if r == c {
				return true
			}
		}
	}
	return false
}

// Spawner starts profiles in new herdr panes and waits until the agent is
// ready for input. With Profiles it is the bridge core's PaneStarter: the
// core decides who is spawned, the Spawner how.
type Spawner struct {
	Client *Client
	// ReadyWait bounds the wait for the new agent to be ready (default 60s).
	ReadyWait time.Duration
	// Profiles are the spawn profiles of this host, by name.
	Profiles map[string]Profile
	// StateDir is the gateway's state dir, told to the spawned agent's
	// `herdbridge mcp` (HERDBRIDGE_STATE_DIR) so it registers with it.
	StateDir string
	// Exe is the herdbridge executable a spawned agent's MCP config runs
	// (spawnkind.go; default: this process's own).
	Exe string
}

var _ bridge.PaneStarter = (*Spawner)(nil)

// ProfileNames lists the spawn profiles, sorted.
func (s *Spawner) ProfileNames() []string {
	out := make([]string, 0, len(s.Profiles))
	for n := range s.Profiles {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// StartPane starts w's profile in a new pane with the environment its
// `herdbridge mcp` reads (name, role, state dir, spawnId as gid, groups).
func (s *Spawner) StartPane(ctx context.Context, w bridge.PaneWorker) (bridge.PaneStarted, error) {
	p, ok := s.Profiles[w.Profile]
	if !ok {
		return bridge.PaneStarted{}, fmt.Errorf("no spawn profile %q", w.Profile)
	}
	env := map[string]string{
		"HERDBRIDGE_NAME":      w.Name,
		"HERDBRIDGE_ROLE":      string(bridge.RoleWorker),
		"HERDBRIDGE_STATE_DIR": s.StateDir,
		"HERDBRIDGE_SPAWN_ID":  w.GID,
	}
	if len(p.Groups) > 0 {
		env["HERDBRIDGE_GROUPS"] = strings.Join(p.Groups, ",")
	}
	p = withKind(p, s.spawnEnv(env)) // what the kind's CLI needs to call the bridge without a dialog
	if w.Cwd != "" {
		p.Cwd = w.Cwd
	}
	if len(p.Command) > 0 {
		p.Command = append(slices.Clip(p.Command), w.Args...)
	} else {
		p.Args = append(slices.Clip(p.Args), w.Args...)
	}
	pane, err := s.start(ctx, p, w.Name, env, w.Passed)
	if err != nil {
		return bridge.PaneStarted{}, err
	}
	return bridge.PaneStarted{Pane: pane, Groups: p.Groups}, nil
}

// ClosePane closes a pane (pane.close); one already gone is
// bridge.ErrPaneGone.
func (s *Spawner) ClosePane(ctx context.Context, pane string) error {
	err := s.Client.PaneClose(ctx, pane)
	if errors.Is(err, ErrPaneNotFound) {
		return fmt.Errorf("%w: %w", bridge.ErrPaneGone, err)
	}
	return err
}

// Start opens a new tab labelled name running p with env added, and waits
// until its agent is interactive-ready and idle. It returns the pane id; on
// failure the pane is closed and the error says the status it was stuck in.
func (s *Spawner) Start(ctx context.Context, p Profile, name string, env map[string]string) (string, error) {
	return s.start(ctx, p, name, env, func(string) {})
}

// start is Start telling phase each phase it passes (bridge.PhasePaneCreated,
// PhaseAgentStarted, PhaseReady).
func (s *Spawner) start(ctx context.Context, p Profile, name string, env map[string]string, phase func(string)) (string, error) {
	wait := s.ReadyWait
	if wait <= 0 {
		wait = 60 * time.Second
	}
	all := map[string]string{}
	for k, v := range p.Env {
		all[k] = v
	}
	for k, v := range env {
		all[k] = v
	}
	var pane string
	if len(p.Command) > 0 {
		id, err := s.Client.LayoutApplyCommand(ctx, "", name, p.Cwd, p.Command, all)
		if err != nil {
			return "", fmt.Errorf("open a pane for %s: %w", name, err)
		}
		pane = id
		phase(bridge.PhasePaneCreated)
		phase(bridge.PhaseAgentStarted) // the command is the agent
	} else {
		root, err := s.Client.TabCreate(ctx, "", p.Cwd, name, all)
		if err != nil {
			return "", fmt.Errorf("open a pane for %s: %w", name, err)
		}
		pane = root.PaneID
		phase(bridge.PhasePaneCreated)
		agentName := name
		if !agentNameRE.MatchString(agentName) {
			agentName = "" // herdr names are stricter than ours: go by pane id
		}
		if err := s.startAgent(ctx, p, agentName, pane); err != nil {
			_ = s.Client.PaneClose(context.WithoutCancel(ctx), pane)
			return "", err
		}
		phase(bridge.PhaseAgentStarted)
	}
	if err := s.waitReady(ctx, pane, len(p.Command) == 0, wait); err != nil {
		_ = s.Client.PaneClose(context.WithoutCancel(ctx), pane)
		return "", err
	}
	phase(bridge.PhaseReady)
	return pane, nil
}

func (s *Spawner) startAgent(ctx context.Context, p Profile, name, pane string) error {
	deadline := time.Now().Add(3 * time.Second) // the shell's rc files may still run: herdr says busy
	for {
		n := name
		if n == "" {
			n = "hb-" + pane // agent.start needs a name
			n = sanitizeAgentName(n)
		}
		_, err := s.Client.AgentStart(ctx, n, p.Kind, pane, p.Args, 0)
		if err == nil {
			return nil
		}
		if !errors.Is(err, ErrAgentPaneBusy) || time.Now().After(deadline) {
			return fmt.Errorf("start %s agent in pane %s: %w", p.Kind, pane, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func sanitizeAgentName(s string) string {
	b := []byte{}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b = append(b, byte(r))
		case r >= 'A' && r <= 'Z':
			b = append(b, byte(r-'A'+'a'))
		default:
			b = append(b, '-')
		}
	}
	if len(b) > 32 {
		b = b[:32]
	}
	return string(b)
}

// waitReady polls until the agent is ready: interactive_ready and idle/done
// for a started agent kind; idle/done for a command.
func (s *Spawner) waitReady(ctx context.Context, pane string, started bool, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	last := "unknown"
	for {
		a, err := s.Client.AgentGet(ctx, pane)
		switch {
		case err == nil:
			last = a.AgentStatus
			if a.LaunchPending {
				last = "launch_pending"
			}
			if Ready(a.AgentStatus) && !a.LaunchPending && (a.InteractiveReady || !started) {
				return nil
			}
		case errors.Is(err, ErrPaneNotFound), errors.Is(err, ErrAgentNotRunning):
			return fmt.Errorf("the pane %s closed while its agent started (the process exited)", pane)
		case errors.Is(err, ErrAgentNotFound):
			// agent.get answers agent_not_found, never pane_not_found, for a
			// pane that is gone: ask about the pane itself.
			if _, perr := s.Client.PaneGet(ctx, pane); errors.Is(perr, ErrPaneNotFound) {
				return fmt.Errorf("the pane %s closed while its agent started (the process exited)", pane)
			}
			last = "no agent detected"
		default:
			return err
		}
		if time.Now().After(deadline) {
			hint := ""
			if last == StatusBlocked {
				hint = " (a dialog, e.g. a trust prompt, waits for an answer)"
			}
			return fmt.Errorf("the agent in pane %s did not become ready within %s: stuck in %s%s", pane, wait, last, hint)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
