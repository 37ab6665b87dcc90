package attacktest

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/herdbridge/herdbridge/bridge"
)

// beatReplays counts the genuine heartbeats of hosts a gateway refused as
// replays (its log says which: kind, reason, msgId and host of each
// refusal), so that the attack is held to exact numbers: heartbeats of one
// gid are stamped strictly later at the sender, so there must be none (the
// end checks it). The heartbeat the attack itself replays is not genuine
// traffic: it is ignored.
type beatReplays struct {
	n atomic.Uint64

	mu      sync.Mutex
	hosts   []string        // known once the harness started the cores
	ignored map[string]bool // msgIds
}

func (r *beatReplays) count() uint64 { return r.n.Load() }

func (r *beatReplays) ignore(msgID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ignored == nil {
		r.ignored = map[string]bool{}
	}
	r.ignored[msgID] = true
}

func (r *beatReplays) watch(hosts ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hosts = hosts
}

// genuine reports whether a heartbeat of host with msgID is genuine traffic.
func (r *beatReplays) genuine(host, msgID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.hosts, host) && !r.ignored[msgID]
}

// Enabled implements slog.Handler.
func (r *beatReplays) Enabled(context.Context, slog.Level) bool { return true }

// Handle implements slog.Handler.
func (r *beatReplays) Handle(_ context.Context, rec slog.Record) error {
	if rec.Message != "message refused" {
		return nil
	}
	attrs := map[string]string{}
	rec.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
	if attrs[bridge.LogKind] == string(bridge.KindPresence) && attrs[bridge.LogReason] == bridge.RefuseReplayed &&
		r.genuine(attrs["host"], attrs[bridge.LogMsgID]) {
		r.n.Add(1)
	}
	return nil
}

// WithAttrs implements slog.Handler.
func (r *beatReplays) WithAttrs([]slog.Attr) slog.Handler { return r }

// WithGroup implements slog.Handler.
func (r *beatReplays) WithGroup(string) slog.Handler { return r }
