package bridge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"strings"

	"github.com/google/uuid"
)

// Spawn: bridge_spawn starts a worker from a spawn profile of a host — on
// this one through the PaneStarter, on another through a SPAWN to its
// control queue (spawnremote.go; control.go dispatches it there) —
// registers it with its spawnId as gid, and briefs it through the forward
// path. spawnId is the dedup key: a spawn whose id was used returns the
// worker it made, never a second pane.

// PaneStarter starts agents in new panes: herdr implements it. Its
// methods may be called concurrently.
type PaneStarter interface {
	// ProfileNames lists the spawn profiles this host offers, sorted.
	ProfileNames() []string
	// StartPane starts profile's agent in a new pane for the worker w,
	// waits until it is ready for input, and returns the pane id and the
	// groups the profile's workers join. On failure no pane is left open.
	StartPane(ctx context.Context, w PaneWorker) (PaneStarted, error)
	// ClosePane closes a pane (a started worker that could not be
	// registered leaves no orphan agent).
	ClosePane(ctx context.Context, pane string) error
}

// PaneWorker is the worker a pane is started for.
type PaneWorker struct {
	Profile string
	Name    string
	GID     string // the spawnId
	// Cwd replaces the profile's cwd when set (checked against the
	// profile's roots by the core, symlinks evaluated).
	Cwd string
	// Args are added to the profile's args (or command), from the
	// profile's allowlists.
	Args []string
	// Phase, if set, is told each phase the start passes (PhasePaneCreated,
	// PhaseAgentStarted, PhaseReady).
	Phase func(phase string)
}

// Passed tells w's Phase that phase was passed.
func (w PaneWorker) Passed(phase string) {
	if w.Phase != nil {
		w.Phase(phase)
	}
}

// PaneStarted is a started worker's pane.
type PaneStarted struct {
	Pane   string
	Groups []string
}

// SpawnRequest is bridge_spawn.
type SpawnRequest struct {
	Host    string // "" or this host: here
	Profile string
	Name    string // default <profile>-<4 hex>
	Brief   string // typed into the new worker once it is ready
	SpawnID string // a UUID; default a new one
	// Choice is the cwd, repo worktree, model and args the caller chose,
	// each allowed by the profile's policy.
	Choice SpawnChoice
}

// spawnClaims serializes spawns of one spawnId or name. Its lock is a leaf.
type spawnClaims struct {
	mu       leafMutex
	inflight map[string]chan struct{} // spawnId or name -> closed when that spawn ends
}

// claim reserves keys for one spawn; a spawn already holding one is waited
// for, then the caller looks again.
func (s *spawnClaims) claim(ctx context.Context, keys ...string) (release func(), err error) {
	for {
		busy := s.tryClaim(keys)
		if busy == nil {
			return func() { s.release(keys) }, nil
		}
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// tryClaim claims keys, or returns the channel of a spawn holding one.
func (s *spawnClaims) tryClaim(keys []string) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight == nil {
		s.inflight = map[string]chan struct{}{}
	}
	for _, k := range keys {
		if ch, ok := s.inflight[k]; ok {
			return ch
		}
	}
	done := make(chan struct{})
	for _, k := range keys {
		s.inflight[k] = done
	}
	return nil
}

func (s *spawnClaims) release(keys []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	done := s.inflight[keys[0]]
	for _, k := range keys {
		delete(s.inflight, k)
	}
	close(done)
}

// profiles lists this host's spawn profiles (none without a PaneStarter).
func (c *Core) profiles() []string {
	if c.cfg.Panes == nil {
		return []string{}
	}
	if p := c.cfg.Panes.ProfileNames(); p != nil {
		return p
	}
	return []string{}
}

// Spawn is bridge_spawn for the entity caller.
func (c *Core) Spawn(ctx context.Context, caller string, req SpawnRequest) (*Result, error) {
	remote := req.Host != "" && req.Host != c.cfg.Host
	if err := c.spawnBriefRefused(caller, req.Brief); err != nil {
		return nil, err // before anything starts: the brief could not be sent
	}
	if !remote { // what this host cannot start is said first
		if req.Name == "" {
			req.Name = defaultWorkerName(req.Profile)
		}
		if err := c.checkLocalSpawn(req); err != nil {
			return nil, err
		}
	}
	req, err := req.normalized()
	if err != nil {
		return nil, err
	}
	if remote {
		return c.spawnRemote(ctx, caller, req)
	}
	return c.spawnLocal(ctx, caller, req)
}

// normalized fills in a new spawnId and a default name, and refuses a
// spawnId that is not a UUID.
func (req SpawnRequest) normalized() (SpawnRequest, error) {
	if req.SpawnID == "" {
		req.SpawnID = uuid.NewString()
	} else if _, err := uuid.Parse(req.SpawnID); err != nil {
		return req, userErr("spawn_id %s is not a UUID", Clip(req.SpawnID))
	}
	if req.Name == "" {
		req.Name = defaultWorkerName(req.Profile)
	}
	return req, nil
}

func defaultWorkerName(profile string) string {
	var b [2]byte
	_, _ = rand.Read(b[:])
	return profile + "-" + hex.EncodeToString(b[:])
}

// spawnLocal starts a worker on this host, then briefs it: the choice is
// checked against the profile's policy, a slot is reserved against the
// limits, then the worker is started and registered.
func (c *Core) spawnLocal(ctx context.Context, caller string, req SpawnRequest) (*Result, error) {
	if err := c.checkLocalSpawn(req); err != nil {
		return nil, err
	}
	plan, err := c.cfg.Spawn.plan(req.Profile, req.Choice)
	if err != nil {
		return nil, err
	}
	release, err := c.spawns.claim(ctx, "id:"+req.SpawnID, "name:"+req.Name)
	if err != nil {
		return nil, err
	}
	defer release()
	// spawnId is the dedup key: a spawn with an id already used returns
	// the worker it made (the registry outlives gateway restarts)
	if e, ok := c.Entity(req.SpawnID); ok {
		return &Result{Status: StatusConfirmed, SpawnID: req.SpawnID, Target: e.Addr(),
			Reason: "already spawned as " + e.Name + " (spawn_id seen before): no second pane"}, nil
	}
	if _, err := c.Resolve(req.Name); err == nil {
		return nil, userErr("an entity named %s already exists here: pick another name", Clip(req.Name))
	}
	free, err := c.slots.reserve(c.cfg.Spawn, req.Profile)
	if err != nil {
		return nil, err
	}
	defer free() // after the worker is registered it counts by its gid
	ph := newPhases(c.cfg.Now)
	res := &Result{SpawnID: req.SpawnID, Target: req.Name + "@" + c.cfg.Host}
	e, failure, err := c.startWorker(ctx, req, plan, ph)
	res.Phases = ph.all()
	switch {
	case err != nil:
		return nil, err
	case failure != "":
		res.Status, res.Reason = StatusFailed, failure
		return res, nil
	}
	res.Target = e.Addr()
	if req.Brief == "" {
		res.Status = StatusConfirmed
		res.Reason = "worker ready in pane " + e.PaneID
		return res, nil
	}
	return c.briefSpawned(ctx, caller, e.GID, req.Brief, ph)
}

// startWorker makes the planned worktree, starts the pane and registers
// the worker; a pane that fails to start is a failure (its reason), not
// an error. What it made is undone when it does not get to the end.
func (c *Core) startWorker(ctx context.Context, req SpawnRequest, plan spawnPlan, ph *phases) (Entity, string, error) {
	w := PaneWorker{Profile: req.Profile, Name: req.Name, GID: req.SpawnID, Cwd: plan.cwd, Args: plan.args, Phase: ph.passed}
	undo := func() {}
	if plan.worktree != "" {
		path, err := addWorktree(ctx, c.cfg.Spawn.WorktreeDir, plan.worktree, req.Name)
		if err != nil {
			return Entity{}, "", err
		}
		ph.passed(PhaseWorktree)
		w.Cwd = path
		undo = func() {
			if err := removeWorktree(context.WithoutCancel(ctx), plan.worktree, path, req.Name); err != nil {
				c.log.Warn("the worktree of a failed spawn was not removed", "path", path, "err", err)
			}
		}
	}
	started, err := c.cfg.Panes.StartPane(ctx, w)
	if err != nil {
		undo()
		return Entity{}, err.Error(), nil
	}
	e, _, err := c.Register(ctx, RegisterRequest{Name: req.Name, Role: RoleWorker, Groups: started.Groups, PaneID: started.Pane, GID: req.SpawnID, NoToken: true, Profile: req.Profile, Spawned: true})
	if err != nil {
		_ = c.cfg.Panes.ClosePane(context.WithoutCancel(ctx), started.Pane) // no orphan agent
		undo()
		return Entity{}, "", err
	}
	ph.passed(PhaseRegistered)
	return e, "", nil
}

// checkLocalSpawn refuses what this host cannot start.
func (c *Core) checkLocalSpawn(req SpawnRequest) error {
	if c.cfg.Panes == nil {
		return userErr("this gateway has no herdr connection to spawn into (herdr is disabled in its config): spawn on a host that has one")
	}
	names := c.profiles()
	if !slices.Contains(names, req.Profile) {
		if len(names) == 0 {
			return userErr("this host has no spawn profiles: define them under \"profiles\" in the gateway's config.json")
		}
		return userErr("no spawn profile %s on %s: profiles are %s", Clip(req.Profile), c.cfg.Host, strings.Join(names, ", "))
	}
	return checkName(req.Name)
}

// briefSpawned sends a new worker its first brief, from the caller.
func (c *Core) briefSpawned(ctx context.Context, caller, spawnID, brief string, ph *phases) (*Result, error) {
	sent, err := c.Send(ctx, caller, SendRequest{Target: spawnID, Message: brief}, nil)
	if err != nil {
		return nil, err
	}
	ph.briefPhase(sent.Status)
	sent.SpawnID, sent.Phases = spawnID, ph.all()
	return sent, nil
}
