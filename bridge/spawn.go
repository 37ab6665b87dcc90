package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// SpawnBody is the body of a SPAWN: which profile, under which name. The
// receiving host runs only profiles it owns; a remote names a profile,
// never a command line.
type SpawnBody struct {
	Profile string `json:"profile"`
	Name    string `json:"name,omitempty"`
}

// SpawnHandler runs a spawn on this host for a SPAWN from another host
// (the gateway's spawn service). It must deduplicate on spawnID: a SPAWN is
// redelivered when its gateway died before acking it.
type SpawnHandler func(ctx context.Context, spawnID string, body SpawnBody) (*Result, error)

// SetSpawnHandler enables SPAWN from other hosts.
func (c *Core) SetSpawnHandler(h SpawnHandler) {
	c.mu.Lock()
	c.spawnHandler = h
	c.mu.Unlock()
}

// onControl handles control.<host>: a SPAWN runs the local spawn, then is
// acked; a failure goes back to the caller as FAILED (corr = the SPAWN).
// Success needs no message: the new worker shows up in the roster.
func (c *Core) onControl(d Delivery) {
	where := "control." + c.cfg.Host
	reason, detail, wait := c.verify(d, func(env *Envelope) string {
		if env.To != "control."+c.cfg.Host || d.Key != "" && d.Key != c.cfg.Host {
			return "SPAWN to " + env.To + " with routing key " + d.Key + " on " + c.cfg.Host
		}
		return ""
	})
	if wait {
		c.waitForPresence(d, where, "control:"+d.Env.MsgID, c.onControl)
		return
	}
	if reason == "" && d.Env.Kind != KindSpawn {
		reason, detail = RefuseBadKind, "a "+string(d.Env.Kind)+" on the control queue"
	}
	if reason != "" {
		c.refuse(d, where, reason, detail)
		return
	}
	env := d.Env
	seenKey := "control:" + env.MsgID
	c.mu.Lock()
	taken := c.seen.has(seenKey)
	c.mu.Unlock()
	if taken {
		if d.Redelivered { // handled and marked, its ack lost: benign
			_ = d.Acker.Ack()
			return
		}
		c.refuse(d, where, RefuseReplayed, "SPAWN msgId already handled")
		return
	}
	var body SpawnBody
	if err := json.Unmarshal(env.Body, &body); err != nil || body.Profile == "" {
		c.refuse(d, where, RefuseMalformed, "bad SPAWN body")
		return
	}
	c.auditEnv("in", env, d.Key, "accepted")
	c.mu.Lock()
	h := c.spawnHandler
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		var res *Result
		var err error
		if h == nil {
			err = fmt.Errorf("host %s cannot spawn: no herdr connection", c.cfg.Host)
		} else {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), 3*time.Minute)
			res, err = h(ctx, env.SpawnID, body)
			cancel()
		}
		reason := ""
		switch {
		case err != nil:
			reason = err.Error()
		case res.Status == StatusFailed:
			reason = res.Reason
		}
		if reason != "" {
			c.log.Warn("remote spawn failed", "spawnId", env.SpawnID, "profile", body.Profile, LogFrom, env.From, LogReason, reason)
			out := c.control(KindFailed, GatewayGID(c.cfg.Host), env.From, env.MsgID, "", env.TraceID, "spawn of "+body.Profile+" on "+c.cfg.Host+" failed: "+reason)
			c.send([]outMsg{out})
		} else {
			c.log.Info("remote spawn done", "spawnId", env.SpawnID, "profile", body.Profile, LogFrom, env.From)
			c.kickPresence()
		}
		c.mu.Lock()
		c.markSeenLocked(seenKey, env)
		c.mu.Unlock()
		if err := d.Acker.Ack(); err != nil {
			c.log.Warn("SPAWN ack failed", LogMsgID, env.MsgID, "err", err)
		}
	}()
}

// RemoteSpawn asks host to start profile as a worker named name with gid
// spawnID. It returns when the worker appears in the roster, when the host
// reports FAILED, or when wait (capped at MaxWait) runs out (pending).
func (c *Core) RemoteSpawn(ctx context.Context, caller, host string, body SpawnBody, spawnID string, wait time.Duration) (*Result, error) {
	st, err := c.caller(caller)
	if err != nil {
		return nil, err
	}
	ct, ok := c.tr.(ControlTransport)
	if !ok {
		return nil, userErr("spawning on host %q needs the broker transport: this gateway runs the embedded one (this host only)", host)
	}
	c.mu.Lock()
	h := c.hosts[host]
	var profiles []string
	if h != nil {
		profiles = h.p.Profiles
	}
	c.mu.Unlock()
	if h == nil {
		return nil, userErr("no gateway of host %q is present: bridge_roster lists the hosts", host)
	}
	if !slices.Contains(profiles, body.Profile) {
		return nil, userErr("host %s has no spawn profile %q: its profiles are %s", host, body.Profile, strings.Join(profiles, ", "))
	}
	raw, _ := json.Marshal(body)
	env := c.newEnv(KindSpawn, caller, "control."+host, raw, 10*time.Minute)
	env.SpawnID = spawnID
	env.TraceID = spawnID
	receipt := make(chan *Envelope, 2)
	c.mu.Lock()
	st.receipts[env.MsgID] = receipt
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(st.receipts, env.MsgID)
		c.mu.Unlock()
	}()
	c.sign(env)
	c.auditEnv("out", env, host, "published")
	if err := ct.PublishControl(ctx, host, env); err != nil {
		return nil, userErr("spawn on %s: %v", host, err)
	}
	res := &Result{Status: StatusPending, MsgID: env.MsgID, SpawnID: spawnID, Target: body.Name + "@" + host}
	timer := time.NewTimer(c.capWait(wait))
	defer timer.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		c.mu.Lock()
		r := c.remote[spawnID]
		c.mu.Unlock()
		if r != nil {
			res.Status, res.Target = StatusConfirmed, r.p.Name+"@"+r.p.Host
			res.Reason = "worker ready on " + host
			return res, nil
		}
		select {
		case f := <-receipt:
			if f.Kind == KindFailed {
				res.Status, res.Reason = StatusFailed, string(f.Body)
				return res, nil
			}
		case <-tick.C:
		case <-timer.C:
			res.Reason = "the spawn is under way on " + host
			res.Next = "bridge_roster shows the worker (gid " + spawnID + ") once it is ready; a FAILED is held for you if it fails"
			return res, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
