package bridge

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
)

// RegisterRequest registers or re-attaches an entity.
type RegisterRequest struct {
	Name   string
	Role   Role
	Groups []string
	PaneID string
	// NoToken re-attaches without minting a bearer token: the stdio relay
	// authenticates by its socket, and minting one per reconnect would push
	// the tokens users configured out of the last-32 window.
	NoToken bool
	// GID fixes the gid of a new entity (a spawned worker's gid is its
	// spawnId). Ignored on re-attach; an existing name with another gid is
	// an error.
	GID string
	// Takeover takes a name held by another live session (nameclaims.go): its
	// connections are closed instead of this registration being refused.
	Takeover bool
	// Token marks a token registration (`herdbridge register`): refused
	// while a live stdio session holds the name, unless Takeover.
	Token bool
	// Spawned marks a worker bridge_spawn started (a new entity only):
	// bridge_stop closes its pane by default.
	Spawned bool
	// Profile marks a spawned worker with its spawn profile (spawn only).
	Profile string
	// History turns the entity's history on or off; nil leaves it as it
	// was (off for a new entity).
	History *bool
}

const maxTokensPerEntity = 32

// Register creates the entity (host, name) or re-attaches to it — same gid,
// same inbox, nothing held is lost — and issues a new bearer token.
func (c *Core) Register(ctx context.Context, req RegisterRequest) (Entity, string, error) {
	var check func(gid string) error
	if req.Token {
		check = func(gid string) error { return c.checkClaim(gid, req, nil) }
	}
	return c.register(ctx, req, check)
}

// register is Register; check (if not nil) may refuse the registration
// once the entity's gid is known, before anything is changed (regMu held).
func (c *Core) register(ctx context.Context, req RegisterRequest, check func(gid string) error) (Entity, string, error) {
	groups, err := checkRegister(req)
	if err != nil {
		return Entity{}, "", err
	}
	c.regMu.Lock()
	defer c.regMu.Unlock()
	if !c.running() {
		return Entity{}, "", errors.New("bridge: core is not running")
	}
	existing := c.reg.named(req.Name)
	if check != nil && existing != nil {
		if err := check(existing.GID); err != nil {
			return Entity{}, "", err // before entityFor: a refusal changes nothing
		}
	}
	st, err := c.entityFor(req, groups)
	if err != nil {
		return Entity{}, "", err
	}
	if check != nil && existing == nil {
		if err := check(st.GID); err != nil { // a new entity: nothing holds it
			return Entity{}, "", err
		}
	}
	token, hash := NewToken()
	st.mu.Lock()
	if req.NoToken {
		token, hash = "", ""
	}
	st.addToken(hash) // "" adds none; either way the newest maxTokensPerEntity stay
	st.seen(c.cfg.Now())
	rec, tokens := st.record(), append([]string(nil), st.tokens...)
	st.mu.Unlock()
	if err := c.st.PutEntity(rec); err != nil {
		return Entity{}, "", fmt.Errorf("bridge: persist entity %s: %w", req.Name, err)
	}
	st.mu.Lock()
	st.saved(rec.LastSeen)
	st.mu.Unlock()
	c.reg.put(st, tokens)
	if rec.Profile != "" {
		c.slots.bind(rec.GID, rec.Profile)
	}
	if err := c.attachInbox(st); err != nil {
		return Entity{}, "", err
	}
	c.kickPresence(st.GID)
	e := st.view()
	c.log.Info("entity registered", LogGID, e.GID, "name", e.Name, "role", e.Role, "groups", e.Groups)
	return e, token, nil
}

// checkRegister validates a registration and normalizes its groups.
func checkRegister(req RegisterRequest) ([]string, error) {
	if err := checkName(req.Name); err != nil {
		return nil, err
	}
	if !req.Role.Valid() {
		return nil, userErr("role %s is not valid: use primary, worker or orchestrator", Clip(string(req.Role)))
	}
	if err := checkPaneID(req.PaneID); err != nil {
		return nil, err
	}
	return normGroups(req.Groups)
}

// entityFor is the entity a registration attaches to: the existing one of
// that name, updated, or a new one (not yet indexed).
func (c *Core) entityFor(req RegisterRequest, groups []string) (*entState, error) {
	if st := c.reg.named(req.Name); st != nil {
		if req.GID != "" && req.GID != st.GID {
			return nil, userErr("name %q is taken on this host by another entity", req.Name)
		}
		st.mu.Lock()
		st.reregister(req, groups)
		st.mu.Unlock()
		return st, nil
	}
	gid := req.GID
	if gid == "" {
		gid = uuid.NewString()
	}
	if other := c.reg.get(gid); other != nil {
		return nil, userErr("gid %s is taken by %s", gid, other.Name)
	}
	if _, leaving := c.gone.get(gid); leaving { // its inbox would be bound again while its drain reports what is left
		return nil, userErr("gid %s is still being removed (what was left in its inbox is being reported to its senders): try again once its removal finished", gid)
	}
	e := Entity{GID: gid, Name: req.Name, Host: c.cfg.Host, Role: req.Role, Groups: groups, PaneID: req.PaneID, Registered: c.cfg.Now().UTC(),
		Profile: req.Profile, Spawned: req.Spawned}
	if req.History != nil {
		e.History = *req.History
	}
	return newEntState(e, c.turns), nil
}

func normGroups(in []string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, g := range in {
		if !ValidGroup(g) {
			return nil, userErr("group %s is not valid: lowercase letters, digits, '_' or '-', at most %d bytes, not \"all\"", Clip(g), MaxGroupBytes)
		}
		if !seen[g] {
			seen[g] = true
			out = append(out, g)
		}
	}
	if len(out) > MaxGroups {
		return nil, userErr("%d groups, over the limit of %d per entity", len(out), MaxGroups)
	}
	return out, nil
}

// Remove deletes an entity and its inbox (`herdbridge remove`): what it
// held is reported FAILED to each sender and what was pending on it
// becomes ABANDONED for its counterparts (removal.go).
func (c *Core) Remove(ctx context.Context, gid string) error {
	return c.removeBecause(ctx, gid, "removed", func(st *entState) string { return st.Addr() + " was removed by its operator" })
}

// removeBecause removes the local entity gid for cause, with the sentence
// why gives.
func (c *Core) removeBecause(ctx context.Context, gid, cause string, why func(*entState) string) error {
	st := c.reg.get(gid)
	if st == nil {
		return userErr("no entity %s", Clip(gid))
	}
	told, removed, err := c.removeEntity(ctx, st, cause, func(st *entState) (string, bool) { return why(st), true })
	if err != nil {
		return err
	}
	if !removed {
		return userErr("no entity %s: it was removed meanwhile", Clip(gid))
	}
	if told > 0 {
		c.log.Info("held messages of a removed entity reported to their senders", LogGID, gid, "cause", cause, "sendersTold", told)
	}
	return nil
}

// Authenticate maps a bearer token to its entity: the index finds the
// entity by the token's hash, and the hash must then match one of the
// entity's own token hashes in a constant-time comparison (token.go says
// why that is enough).
func (c *Core) Authenticate(token string) (Entity, bool) {
	h := HashToken(token)
	st := c.reg.byToken(h)
	if st == nil {
		return Entity{}, false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.removed || !st.hasTokenHash(h) {
		return Entity{}, false
	}
	st.seen(c.cfg.Now()) // a token entity may have no session between calls
	return st.snapshot(), true
}

// Entity returns the local entity gid.
func (c *Core) Entity(gid string) (Entity, bool) {
	st := c.reg.get(gid)
	if st == nil {
		return Entity{}, false
	}
	return st.view(), true
}

// Attach records that one more MCP session of gid is open.
func (c *Core) Attach(gid string) {
	if st := c.reg.get(gid); st != nil {
		st.mu.Lock()
		st.attach(c.cfg.Now())
		st.mu.Unlock()
	}
}

// Detach records that one MCP session of gid closed. When the last one
// closes and none re-attaches within ReattachGrace, what was pending on the
// entity becomes ABANDONED for its counterparts.
func (c *Core) Detach(gid string) {
	if st := c.reg.get(gid); st != nil {
		st.mu.Lock()
		st.detach(c.cfg.Now())
		st.mu.Unlock()
	}
}
