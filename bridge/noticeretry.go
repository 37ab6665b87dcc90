package bridge

import (
	"context"
	"errors"
	"time"
)

// Notices kept for a retry. A notice — FAILED, ABANDONED, INJECTED and
// the other kinds publishAll publishes — has no caller to tell when its
// publish fails: before, it was logged "notice not delivered" and gone, so
// its addressee heard nothing until the message it was about expired. A
// broker outage does not get here on a gateway with a broker (the split
// transport spools a notice in its outbox, durably, in either outage
// mode); what does is a transport that cannot take it at all now — the
// local store on a full disk, the outbox full, a bare link that is down.
// So a notice whose publish failed for any reason but "no inbox takes it"
// (noticelost.go) is kept here, in memory, bounded in bytes, and the
// sweeper publishes it again, oldest first, until it goes or expires. The
// same envelope goes each time, so a copy that did arrive after all is
// dropped by its msgId at the receiver like any repeat. What is kept dies
// with the process: the disk that would keep it is the one that is full.

// noticeRetryMaxBytes bounds the notices kept for a retry (about 600
// bytes each with a sentence of reason); past it a notice is dropped,
// logged and counted.
const noticeRetryMaxBytes = 4 << 20

// noticeRetryWait bounds one retry: the sweeper must not wait long on a
// transport still down.
const noticeRetryWait = 500 * time.Millisecond

// noticeBacklog holds notices whose publish failed (its lock is a leaf).
type noticeBacklog struct {
	mu      leafMutex
	envs    []*Envelope
	bytes   int
	dropped int
}

func noticeBytes(env *Envelope) int {
	return 512 + len(env.Body) + len(env.MsgID) + len(env.From) + len(env.To) + len(env.Corr) + len(env.TraceID)
}

// keep adds env at the back; false: over the byte bound, dropped.
func (b *noticeBacklog) keep(env *Envelope) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := noticeBytes(env)
	if b.bytes+n > noticeRetryMaxBytes {
		b.dropped++
		return false
	}
	b.envs, b.bytes = append(b.envs, env), b.bytes+n
	return true
}

// putBack puts envs, taken and not yet published, back at the front (what
// was kept meanwhile goes after them); past the bound the newest go.
func (b *noticeBacklog) putBack(envs []*Envelope) {
	b.mu.Lock()
	defer b.mu.Unlock()
	all := append(append([]*Envelope(nil), envs...), b.envs...)
	b.envs, b.bytes = nil, 0
	for _, env := range all {
		if n := noticeBytes(env); b.bytes+n <= noticeRetryMaxBytes {
			b.envs, b.bytes = append(b.envs, env), b.bytes+n
		} else {
			b.dropped++
		}
	}
}

func (b *noticeBacklog) take() (envs []*Envelope, dropped int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	envs, dropped = b.envs, b.dropped
	b.envs, b.bytes, b.dropped = nil, 0, 0
	return envs, dropped
}

// keepNotice keeps env, whose publish failed with err, for the sweeper;
// false: the backlog is full and it is lost (logged here).
func (c *Core) keepNotice(env *Envelope, err error) bool {
	c.delayNotice(env)
	if c.noticeLater.keep(env) {
		c.log.Warn("notice not published now: kept and published again when the transport takes it", LogKind, env.Kind, LogMsgID, env.MsgID,
			LogTraceID, env.TraceID, "corr", env.Corr, LogTo, env.To, "err", err)
		return true
	}
	c.log.Error("notice not delivered: it could not be published and the notices kept for a retry are full", LogKind, env.Kind, LogMsgID, env.MsgID,
		LogTraceID, env.TraceID, "corr", env.Corr, LogTo, env.To, "err", err, "maxBytes", noticeRetryMaxBytes)
	return false
}

// flushNotices publishes the kept notices again, oldest first, until one
// still fails (it and the rest wait for the next sweep).
func (c *Core) flushNotices() {
	envs, dropped := c.noticeLater.take()
	if dropped > 0 {
		c.log.Error("notices dropped: they could not be published and the notices kept for a retry were full", "n", dropped)
	}
	now, sent := c.cfg.Now(), 0
	for i, env := range envs {
		out, taken := c.retryNotice(env, now)
		if !taken {
			c.noticeLater.putBack(envs[i:])
			break
		}
		if out {
			sent++
		}
	}
	if sent > 0 {
		c.log.Info("notices published after their first publish failed", "n", sent)
	}
}

// retryNotice publishes env again. taken: it leaves the backlog — out
// (published), or no inbox takes it (recorded), or it expired meanwhile
// (what it was about has expired too); false: the transport still
// refuses it.
func (c *Core) retryNotice(env *Envelope, now time.Time) (out, taken bool) {
	if !now.Before(env.ExpiresAt) {
		c.log.Warn("notice not delivered: it expired before the transport took it", LogKind, env.Kind, LogMsgID, env.MsgID,
			LogTraceID, env.TraceID, "corr", env.Corr, LogTo, env.To)
		return false, true
	}
	ctx, cancel := context.WithTimeout(c.ctx, noticeRetryWait)
	err := c.publish(ctx, env.To, env, true)
	cancel()
	switch {
	case err == nil:
		return true, true
	case errors.Is(err, ErrUnroutable):
		c.noticeUnroutable(env, err)
		return false, true
	}
	return false, false
}
