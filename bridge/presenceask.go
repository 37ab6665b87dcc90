package bridge

import (
	"context"
	"encoding/json"
	"time"
)

// The PRESENCE_ASK and PRESENCE_SNAPSHOT exchange of presence by host
// (presencesync.go says when and why): both on control queues, both
// signed by the sending host's gateway and verified like every control
// message, both only from a gateway itself.

func isPresenceSyncKind(k Kind) bool { return k == KindPresenceAsk || k == KindPresenceSnapshot }

// publishSync is a round of presence by host (pub held by publishBeats):
// a delta for each change since the last round, then — when beat — the
// _gateway heartbeat with the digest, preceded by every other entity's
// plain heartbeat while a host without digests is in the roster.
func (c *Core) publishSync(beat bool) {
	c.publishBeats(func() []Presence {
		first := c.pres.own.digest.Hash == "" // nothing of this run published yet
		cur, ps := c.ownDeltas()
		if !beat {
			return ps
		}
		if first {
			// A new run is a new epoch: every receiver asks for the
			// snapshot whatever deltas come first (and one that holds
			// this same set takes the digest as it is), so the first
			// round's deltas — one per entity, to every host, E × G
			// deliveries per start — would only be thrown away.
			ps = nil
		}
		if c.pres.legacyPeers() {
			changed := map[string]bool{}
			for _, p := range ps {
				changed[p.GID] = true
			}
			for _, p := range cur {
				if !changed[p.GID] {
					ps = append(ps, p)
				}
			}
		}
		d := c.pres.own.digest
		return append(ps, c.gatewayPresence(&d))
	})
}

// ownDeltas are this host's entries now and the deltas since the last
// round (pub held).
func (c *Core) ownDeltas() (cur, deltas []Presence) {
	profiles := cleanPresence(Presence{Profiles: c.profiles()}).Profiles
	cur = c.localPresences()
	return cur, c.pres.own.diffOwn(cur, profiles, c.startedAt.UnixMilli())
}

// gatewayPresence is the host's own _gateway entry.
func (c *Core) gatewayPresence(d *PresenceDigest) Presence {
	sealKey, sealID := c.ownSealKey()
	return Presence{GID: GatewayGID(c.cfg.Host), Name: GatewayName, Host: c.cfg.Host, Profiles: c.profiles(), Key: c.cfg.KeyFingerprint,
		Started: c.startedAt.UnixMilli(), Trusts: c.trustList(), DeadLetterNotices: true, GiveUps: true, SealKey: sealKey, SealKeyID: sealID,
		SealsBroadcasts: sealKey != "", Digest: d}
}

// askSnapshot sends host a PRESENCE_ASK (the caller checked the rate).
func (c *Core) askSnapshot(host, why string) {
	ct, ok := c.tr.(ControlTransport)
	if !ok {
		return
	}
	epoch, ver := c.pres.syncState(host)
	raw, _ := json.Marshal(PresenceAskBody{Epoch: epoch, Ver: ver})
	env := c.newEnv(KindPresenceAsk, GatewayGID(c.cfg.Host), "control."+host, raw, c.cfg.PresenceTTL)
	c.sign(env)
	c.log.Info("presence: asking for a snapshot", "host", host, LogReason, why, "epoch", epoch, "ver", ver)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
		defer cancel()
		if err := ct.PublishControl(ctx, host, env); err != nil && c.ctx.Err() == nil {
			c.log.Warn("presence: PRESENCE_ASK not published", "host", host, "err", err)
		}
	}()
}

// ParsePresenceAsk decodes a PRESENCE_ASK's body.
func ParsePresenceAsk(body []byte) (PresenceAskBody, error) {
	var b PresenceAskBody
	err := json.Unmarshal(body, &b)
	return b, err
}

// onPresenceSync handles a PRESENCE_ASK or a PRESENCE_SNAPSHOT page on
// control.<host>; a refused one is dead-lettered with a log line.
func (c *Core) onPresenceSync(d Delivery) {
	env := d.Env
	where := "control." + c.cfg.Host
	reason, detail, _ := c.verify(d, c.gatewayToErr(d, KindPresenceSnapshot))
	if reason == "" && env.From != GatewayGID(env.Host) {
		reason, detail = RefuseFromNotOnHost, "a "+string(env.Kind)+" from "+Clip(env.From)+", not from the gateway of "+env.Host
	}
	if reason == "" && env.Host == c.cfg.Host {
		reason, detail = RefuseToMismatch, "a "+string(env.Kind)+" from this host itself"
	}
	if reason == "" && c.mem.has("control:"+env.MsgID) {
		if d.Redelivered {
			_ = d.Acker.Ack()
			return
		}
		reason, detail = RefuseReplayed, string(env.Kind)+" msgId already handled"
	}
	var pg SnapshotPage
	var err error
	if reason == "" && env.Kind == KindPresenceAsk {
		_, err = ParsePresenceAsk(env.Body)
	} else if reason == "" {
		pg, err = ParseSnapshotPage(env.Body, env.Host)
	}
	if err != nil {
		reason, detail = RefuseMalformed, err.Error()
	}
	if reason == "" && env.Kind == KindPresenceSnapshot {
		now := c.cfg.Now()
		for _, e := range pg.Entries {
			if on := c.ownerOf(e.GID, now); on != "" && on != env.Host {
				reason, detail = RefuseFromNotOnHost, "snapshot of "+env.Host+" names "+e.GID+", which lives on "+on
				break
			}
		}
	}
	if reason != "" {
		c.refuse(d, where, reason, detail)
		return
	}
	c.mem.markEnv("control:"+env.MsgID, env)
	switch {
	case env.Kind == KindPresenceAsk:
		c.answerAsk(env)
	case !c.cfg.PresencePerEntity: // per entity, as an old gateway, it reads no snapshot
		c.takeSnapshotPage(d, pg)
	}
	if err := d.Acker.Ack(); err != nil {
		c.log.Debug("presence sync ack failed", LogKind, env.Kind, "err", err)
	}
}

// answerAsk publishes this host's snapshot to the asking host's control
// queue, at most once per asker per half askEvery.
func (c *Core) answerAsk(ask *Envelope) {
	ct, ok := c.tr.(ControlTransport)
	if !ok || c.cfg.PresencePerEntity {
		return
	}
	if !c.pres.mayAnswer(ask.Host, c.cfg.Now(), c.askEvery()) {
		c.log.Debug("presence: PRESENCE_ASK answered a moment ago: not again", "host", ask.Host)
		return
	}
	var envs []*Envelope
	c.publishBeats(func() []Presence { // under pub: the pages are of one version
		_, deltas := c.ownDeltas() // the pages are of what was published
		for _, raw := range c.pres.own.pages(c.startedAt.UnixMilli()) {
			env := c.newEnv(KindPresenceSnapshot, GatewayGID(c.cfg.Host), GatewayGID(ask.Host), raw, c.cfg.PresenceTTL)
			env.Corr = ask.MsgID
			c.sign(env)
			envs = append(envs, env)
		}
		return deltas
	})
	if envs == nil {
		c.log.Warn("presence: the snapshot does not fit its bounds: not answered", "host", ask.Host)
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
		defer cancel()
		for _, env := range envs {
			if err := ct.PublishControl(ctx, ask.Host, env); err != nil {
				if c.ctx.Err() == nil {
					c.log.Warn("presence: PRESENCE_SNAPSHOT not published", "host", ask.Host, "err", err)
				}
				return
			}
		}
		c.log.Debug("presence: snapshot sent", "host", ask.Host, "pages", len(envs))
	}()
}

// takeSnapshotPage assembles a verified page; once the snapshot is whole,
// its entities are bound and what waited for their presence is redone.
func (c *Core) takeSnapshotPage(d Delivery, pg SnapshotPage) {
	host := d.Env.Host
	now := c.cfg.Now()
	done, err := c.pres.snapshotPage(host, pg, len(d.Env.Body), now)
	if err != nil {
		c.log.Warn("presence: snapshot refused", "host", host, LogReason, err.Error())
		return
	}
	if done == nil {
		return
	}
	for _, e := range done {
		c.mem.bind(e.GID, host, e.Role, now)
	}
	c.log.Debug("presence: snapshot applied", "host", host, "epoch", pg.Epoch, "ver", pg.Ver, "entities", len(done))
	for _, e := range done {
		c.redoPending(e.GID)
	}
}
