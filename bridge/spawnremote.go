package bridge

import (
	"context"
	"encoding/json"
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
	// the caller's choices, checked by the receiving host against its own
	// profile's policy
	SpawnChoice
}

// spawnRemote sends SPAWN to req.Host, waits for the worker to appear in
// the roster, then briefs it from here (the brief is the caller's own
// message, so it is published, and signed, by the caller's gateway).
func (c *Core) spawnRemote(ctx context.Context, caller string, req SpawnRequest) (*Result, error) {
	ph := newPhases(c.cfg.Now)
	res, err := c.remoteSpawn(ctx, caller, req.Host, SpawnBody{Profile: req.Profile, Name: req.Name, SpawnChoice: req.Choice}, req.SpawnID, c.maxWait(ctx), ph)
	if err != nil || res.Status != StatusConfirmed || req.Brief == "" {
		return res, err
	}
	return c.briefSpawned(ctx, caller, req.SpawnID, req.Brief, ph)
}

// RemoteSpawn asks host to start profile as a worker named name with gid
// spawnID. It returns when the worker appears in the roster, when the host
// reports FAILED, or when wait (capped at MaxWait) runs out (pending).
func (c *Core) RemoteSpawn(ctx context.Context, caller, host string, body SpawnBody, spawnID string, wait time.Duration) (*Result, error) {
	return c.remoteSpawn(ctx, caller, host, body, spawnID, wait, newPhases(c.cfg.Now))
}

// remoteSpawn is RemoteSpawn recording its phases in ph: the SPAWN sent,
// the worker ready (seen in the roster).
func (c *Core) remoteSpawn(ctx context.Context, caller, host string, body SpawnBody, spawnID string, wait time.Duration, ph *phases) (*Result, error) {
	st, err := c.caller(caller)
	if err != nil {
		return nil, err
	}
	ct, ok := c.tr.(ControlTransport)
	if !ok {
		return nil, userErr("spawning on host %s needs the broker transport: this gateway runs the embedded one (this host only)", Clip(host))
	}
	if err := c.checkRemoteProfile(host, body.Profile); err != nil {
		return nil, err
	}
	raw, _ := json.Marshal(body)
	env := c.newEnv(KindSpawn, caller, "control."+host, raw, 10*time.Minute)
	env.SpawnID, env.TraceID = spawnID, spawnID
	receipts, done := st.expectReceipt(env.MsgID)
	defer done()
	wire, err := c.sealAndSign(env)
	if err != nil {
		return nil, err
	}
	c.observeEnv(HopPublish, env, host, "published")
	if err := ct.PublishControl(ctx, host, wire); err != nil {
		return nil, userErr("spawn on %s: %v", host, err)
	}
	ph.passed(PhaseSpawnSent)
	res := &Result{Status: StatusPending, MsgID: env.MsgID, SpawnID: spawnID, Target: body.Name + "@" + host}
	ready := func() bool {
		r := c.pres.entry(spawnID)
		if r != nil {
			res.Status, res.Target = StatusConfirmed, r.p.Name+"@"+r.p.Host
			res.Reason = "worker ready on " + host
			ph.passed(PhaseReady)
		}
		return r != nil
	}
	failed := func(f *Envelope) bool {
		if f.Kind == KindFailed {
			c.endedBy(res, StatusFailed, f)
		}
		return f.Kind == KindFailed
	}
	if _, err := c.await(ctx, waitSpec{st: st, d: c.capWait(ctx, wait), done: ready, every: 50 * time.Millisecond, receipts: receipts, onReceipt: failed}); err != nil {
		return nil, err
	}
	res.Phases = ph.all()
	if res.Status == StatusPending {
		res.Reason = "the spawn is under way on " + host
		res.Next = "bridge_roster shows the worker (gid " + spawnID + ") once it is ready; a FAILED is held for you if it fails"
	}
	return res, nil
}

// checkRemoteProfile refuses a spawn on a host that is not present or
// does not offer profile.
func (c *Core) checkRemoteProfile(host, profile string) error {
	h := c.pres.host(host)
	if h == nil {
		return userErr("no gateway of host %s is present: bridge_roster lists the hosts", Clip(host))
	}
	if why := c.distrustedBy(host); why != "" {
		return userErr("spawn on %s: %s", host, why)
	}
	if profiles := h.p.Profiles; !slices.Contains(profiles, profile) {
		return userErr("host %s has no spawn profile %s: its profiles are %s", host, Clip(profile), strings.Join(profiles, ", "))
	}
	return nil
}

// runRemoteSpawn runs a SPAWN another host asked for, reports a failure to
// its caller, and acks it (a gateway that dies mid-spawn gets it again, and
// deduplicates on spawnId).
func (c *Core) runRemoteSpawn(d Delivery) {
	defer c.wg.Done()
	env := d.Env
	var body SpawnBody
	_ = json.Unmarshal(env.Body, &body) // checked by admitControl
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), 3*time.Minute)
	req, err := SpawnRequest{Profile: body.Profile, Name: body.Name, SpawnID: env.SpawnID, Choice: body.SpawnChoice}.normalized()
	var res *Result
	if err == nil {
		res, err = c.spawnLocal(ctx, "", req)
	}
	cancel()
	reason := ""
	switch {
	case err != nil:
		reason = err.Error()
	case res.Status == StatusFailed:
		reason = res.Reason
	}
	if reason != "" {
		c.log.Warn("remote spawn failed", "spawnId", env.SpawnID, "profile", body.Profile, LogFrom, env.From, LogReason, reason)
		c.publishAll([]outMsg{c.receiptFor(KindFailed, GatewayGID(c.cfg.Host), env, "spawn of "+body.Profile+" on "+c.cfg.Host+" failed: "+reason)})
	} else {
		c.log.Info("remote spawn done", "spawnId", env.SpawnID, "profile", body.Profile, LogFrom, env.From)
		c.kickPresence()
	}
	c.mem.markEnv("control:"+env.MsgID, env)
	if err := d.Acker.Ack(); err != nil {
		c.log.Warn("SPAWN ack failed", LogMsgID, env.MsgID, LogTraceID, env.TraceID, "err", err)
	}
}
