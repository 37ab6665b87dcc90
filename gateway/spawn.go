package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/herdr"
	"github.com/herdbridge/herdbridge/mcp"
)

// spawnService is bridge_spawn on this host: a profile from the gateway's
// configuration started in a new herdr pane, registered with its spawnId as
// gid, then briefed through the forward path.
type spawnService struct {
	core     *bridge.Core
	sp       *herdr.Spawner
	profiles map[string]herdr.Profile
	stateDir string

	mu       sync.Mutex
	inflight map[string]chan struct{} // spawnId or name -> closed when that spawn ends
}

// claim reserves keys (the spawnId and the name) for one spawn; a spawn
// already holding one is waited for, then the caller looks again.
func (s *spawnService) claim(ctx context.Context, keys ...string) (func(), error) {
	for {
		s.mu.Lock()
		if s.inflight == nil {
			s.inflight = map[string]chan struct{}{}
		}
		var busy chan struct{}
		for _, k := range keys {
			if ch, ok := s.inflight[k]; ok {
				busy = ch
				break
			}
		}
		if busy == nil {
			done := make(chan struct{})
			for _, k := range keys {
				s.inflight[k] = done
			}
			s.mu.Unlock()
			return func() {
				s.mu.Lock()
				for _, k := range keys {
					delete(s.inflight, k)
				}
				s.mu.Unlock()
				close(done)
			}, nil
		}
		s.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

var _ mcp.Spawner = (*spawnService)(nil)

func (s *spawnService) Profiles() []string {
	out := make([]string, 0, len(s.profiles))
	for n := range s.profiles {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (s *spawnService) Spawn(ctx context.Context, caller string, req mcp.SpawnRequest) (*bridge.Result, error) {
	if req.Host != "" && req.Host != s.core.Host() {
		return s.spawnRemote(ctx, caller, req)
	}
	return s.spawnLocal(ctx, caller, req)
}

// spawnRemote sends SPAWN to req.Host, waits for the worker to appear in
// the roster, then briefs it from here (the brief is the caller's own
// message, so it is published, and later signed, by the caller's gateway).
func (s *spawnService) spawnRemote(ctx context.Context, caller string, req mcp.SpawnRequest) (*bridge.Result, error) {
	spawnID := req.SpawnID
	if spawnID == "" {
		spawnID = uuid.NewString()
	} else if _, err := uuid.Parse(spawnID); err != nil {
		return nil, &bridge.UserError{Msg: fmt.Sprintf("spawn_id %q is not a UUID", spawnID)}
	}
	name := req.Name
	if name == "" {
		var b [2]byte
		_, _ = rand.Read(b[:])
		name = req.Profile + "-" + hex.EncodeToString(b[:])
	}
	res, err := s.core.RemoteSpawn(ctx, caller, req.Host, bridge.SpawnBody{Profile: req.Profile, Name: name}, spawnID, s.core.Config().MaxWait)
	if err != nil || res.Status != bridge.StatusConfirmed || req.Brief == "" {
		return res, err
	}
	sent, err := s.core.Send(ctx, caller, bridge.SendRequest{Target: spawnID, Message: req.Brief}, nil)
	if err != nil {
		return nil, err
	}
	sent.SpawnID = spawnID
	return sent, nil
}

// handleRemote is the SPAWN handler: a spawn another host asked for (no
// brief: the caller sends it once the worker is in the roster).
func (s *spawnService) handleRemote(ctx context.Context, spawnID string, body bridge.SpawnBody) (*bridge.Result, error) {
	return s.spawnLocal(ctx, "", mcp.SpawnRequest{Profile: body.Profile, Name: body.Name, SpawnID: spawnID})
}

func (s *spawnService) spawnLocal(ctx context.Context, caller string, req mcp.SpawnRequest) (*bridge.Result, error) {
	if s.sp == nil {
		return nil, &bridge.UserError{Msg: "this gateway has no herdr connection to spawn into (herdr is disabled in its config): spawn on a host that has one"}
	}
	p, ok := s.profiles[req.Profile]
	if !ok {
		if len(s.profiles) == 0 {
			return nil, &bridge.UserError{Msg: "this host has no spawn profiles: define them under \"profiles\" in the gateway's config.json"}
		}
		return nil, &bridge.UserError{Msg: fmt.Sprintf("no spawn profile %q on %s: profiles are %s", req.Profile, s.core.Host(), strings.Join(s.Profiles(), ", "))}
	}
	name := req.Name
	if name == "" {
		var b [2]byte
		_, _ = rand.Read(b[:])
		name = req.Profile + "-" + hex.EncodeToString(b[:])
	}
	if !bridge.ValidName(name) {
		return nil, &bridge.UserError{Msg: fmt.Sprintf("name %q is not valid: letters, digits, '.', '_' or '-'", name)}
	}
	spawnID := req.SpawnID
	if spawnID == "" {
		spawnID = uuid.NewString()
	} else if _, err := uuid.Parse(spawnID); err != nil {
		return nil, &bridge.UserError{Msg: fmt.Sprintf("spawn_id %q is not a UUID", spawnID)}
	}
	release, err := s.claim(ctx, "id:"+spawnID, "name:"+name)
	if err != nil {
		return nil, err
	}
	defer release()
	// spawnId is the dedup key: a spawn with an id already used returns
	// the worker it made (the registry outlives gateway restarts)
	if e, ok := s.core.Entity(spawnID); ok {
		return &bridge.Result{Status: bridge.StatusConfirmed, SpawnID: spawnID, Target: e.Addr(),
			Reason: "already spawned as " + e.Name + " (spawn_id seen before): no second pane"}, nil
	}
	if _, err := s.core.Resolve(name); err == nil {
		return nil, &bridge.UserError{Msg: fmt.Sprintf("an entity named %q already exists here: pick another name", name)}
	}
	env := map[string]string{
		"HERDBRIDGE_NAME":      name,
		"HERDBRIDGE_ROLE":      string(bridge.RoleWorker),
		"HERDBRIDGE_STATE_DIR": s.stateDir,
		"HERDBRIDGE_SPAWN_ID":  spawnID,
	}
	if len(p.Groups) > 0 {
		env["HERDBRIDGE_GROUPS"] = strings.Join(p.Groups, ",")
	}
	res := &bridge.Result{SpawnID: spawnID, Target: name + "@" + s.core.Host()}
	pane, err := s.sp.Start(ctx, p, name, env)
	if err != nil {
		res.Status, res.Reason = bridge.StatusFailed, err.Error()
		return res, nil
	}
	e, _, err := s.core.Register(ctx, bridge.RegisterRequest{Name: name, Role: bridge.RoleWorker, Groups: p.Groups, PaneID: pane, GID: spawnID, NoToken: true})
	if err != nil {
		_ = s.sp.Client.PaneClose(context.WithoutCancel(ctx), pane) // no orphan agent
		return nil, err
	}
	res.Target = e.Addr()
	if req.Brief == "" {
		res.Status = bridge.StatusConfirmed
		res.Reason = "worker ready in pane " + pane
		return res, nil
	}
	sent, err := s.core.Send(ctx, caller, bridge.SendRequest{Target: e.GID, Message: req.Brief}, nil)
	if err != nil {
		return nil, err
	}
	sent.SpawnID = spawnID
	return sent, nil
}
