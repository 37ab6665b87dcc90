package bridge

import (
	"context"
	"fmt"
	"strings"
	"sync"
)

// Names never merge: a name held by a live stdio session (`herdbridge
// mcp`, through the gateway's admin socket) belongs to that session's
// claimant until its last connection closes. Another claimant registering
// the name meanwhile is refused with a ClaimError that names the holder and
// the way out, unless it asks to take the name over: the holder's
// connections are then closed, and its relay, refused on reconnect, exits
// saying so.
//
// What identifies "the same claimant" (Claimant.Same):
//   - in a herdr pane: the pane id. A restarted MCP process in the same
//     pane, or a second one there, is the same claimant;
//   - elsewhere: the claim id, a random id the relay process draws once
//     and sends on every (re)connect. Its reconnects after a gateway
//     restart, or while the gateway has not yet seen its old connection
//     close, are the same claimant; another process is not, even with the
//     same pid after a reuse.
//   - a request with neither (an older relay, a hand-written client) is
//     the one anonymous claimant.
//
// The role is part of the claim: the same claimant asking for another role
// while its session is live is refused too (the name would flip roles under
// the live session).
//
// Token registrations (`herdbridge register`, for MCP over HTTP) are no
// live session: they hold nothing, and are refused while a stdio session
// holds the name, unless they take it over (Takeover). Once the stdio
// session is gone the name re-attaches as before (same gid, same inbox).

// Claimant is who registers a name for a live session.
type Claimant struct {
	Pane string `json:"pane,omitempty"` // herdr pane id: the claimant in herdr
	PID  int    `json:"pid,omitempty"`  // the relay's pid: shown in errors only
	ID   string `json:"id,omitempty"`   // random per relay process: the claimant outside herdr
}

// Same reports whether a and b are the same claimant.
func (a Claimant) Same(b Claimant) bool {
	if a.Pane != "" || b.Pane != "" {
		return a.Pane == b.Pane
	}
	return a.ID == b.ID
}

func (a Claimant) String() string {
	var parts []string
	if a.Pane != "" {
		parts = append(parts, "pane "+a.Pane)
	}
	if a.PID != 0 {
		parts = append(parts, fmt.Sprintf("pid %d", a.PID))
	}
	if len(parts) == 0 {
		return "a session without a claim id"
	}
	return strings.Join(parts, ", ")
}

// ClaimError is the refusal of a name held by another live session.
type ClaimError struct {
	Name   string
	Holder Claimant
	Role   Role
}

func (e *ClaimError) Error() string {
	return fmt.Sprintf("name %q is in use by a live session (%s, role %s): pick another name with --name NEW, "+
		"or take it over with --takeover (that session then loses it)", e.Name, e.Holder, e.Role)
}

// claimHold is one live connection holding a name.
type claimHold struct {
	who  Claimant
	role Role
	kick func() // closes the connection (takeover)
}

// nameClaims are the live holds, by gid.
type nameClaims struct {
	mu    leafMutex
	byGID map[string]map[*claimHold]struct{}
}

// conflict is a live hold on gid that req may not share, if any.
func (n *nameClaims) conflict(gid string, who *Claimant, role Role) *claimHold {
	n.mu.Lock()
	defer n.mu.Unlock()
	for h := range n.byGID[gid] {
		if who == nil || !h.who.Same(*who) || h.role != role {
			return h
		}
	}
	return nil
}

// evict drops every hold on gid and returns their kicks.
func (n *nameClaims) evict(gid string) []func() {
	n.mu.Lock()
	defer n.mu.Unlock()
	var kicks []func()
	for h := range n.byGID[gid] {
		if h.kick != nil {
			kicks = append(kicks, h.kick)
		}
	}
	delete(n.byGID, gid)
	return kicks
}

func (n *nameClaims) hold(gid string, h *claimHold) func() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.byGID == nil {
		n.byGID = map[string]map[*claimHold]struct{}{}
	}
	if n.byGID[gid] == nil {
		n.byGID[gid] = map[*claimHold]struct{}{}
	}
	n.byGID[gid][h] = struct{}{}
	var once sync.Once
	return func() {
		once.Do(func() {
			n.mu.Lock()
			defer n.mu.Unlock()
			if m := n.byGID[gid]; m != nil {
				delete(m, h)
				if len(m) == 0 {
					delete(n.byGID, gid)
				}
			}
		})
	}
}

// Holder is the claimant holding gid's name live, if any.
func (c *Core) Holder(gid string) (Claimant, bool) {
	if h := c.claims.conflict(gid, nil, ""); h != nil {
		return h.who, true
	}
	return Claimant{}, false
}

// Claim registers req for a live session of who, as Register does, and
// holds the name for it until release is called (the session ended). A
// name another claimant holds live is refused (*ClaimError) unless
// req.Takeover: then the holder's connections are closed by their kick.
// kick closes this session's connection if another claimant takes the
// name over later.
func (c *Core) Claim(ctx context.Context, req RegisterRequest, who Claimant, kick func()) (e Entity, release func(), err error) {
	req.NoToken = true
	var rel func()
	e, _, err = c.register(ctx, req, func(gid string) error {
		if err := c.checkClaim(gid, req, &who); err != nil {
			return err
		}
		rel = c.claims.hold(gid, &claimHold{who: who, role: req.Role, kick: kick})
		return nil
	})
	if err != nil {
		if rel != nil {
			rel()
		}
		return Entity{}, nil, err
	}
	return e, rel, nil
}

// checkClaim applies the rule to a registration of an existing gid (who
// nil: a token registration). regMu held.
func (c *Core) checkClaim(gid string, req RegisterRequest, who *Claimant) error {
	h := c.claims.conflict(gid, who, req.Role)
	if h == nil {
		return nil
	}
	if !req.Takeover {
		return &ClaimError{Name: req.Name, Holder: h.who, Role: h.role}
	}
	for _, kick := range c.claims.evict(gid) {
		kick()
	}
	c.log.Info("name taken over", "name", req.Name, "from", h.who.String(), "role", h.role)
	return nil
}
