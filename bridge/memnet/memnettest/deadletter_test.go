package memnettest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/memnet"
	"github.com/herdbridge/herdbridge/bridge/memnet/memnettest"
)

// failedFor polls gid on h until it holds a FAILED about each of want
// (msgIds) and returns how many FAILEDs came per msgId, after the polls
// have found nothing more for a while.
func failedFor(t *testing.T, h *memnettest.Host, gid string, want map[string]bool) map[string]int {
	t.Helper()
	got := map[string]int{}
	missing := func() int {
		n := 0
		for id := range want {
			if got[id] == 0 {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(memnettest.Timeout)
	for missing() > 0 && time.Now().Before(deadline) {
		r, err := h.Core.Poll(ctx, gid, bridge.PollRequest{Wait: 200 * time.Millisecond, Max: 500}, nil)
		if err != nil {
			t.Fatalf("poll on %s: %v", h.ID, err)
		}
		for _, m := range r.Messages {
			if m.Kind == bridge.KindFailed {
				got[m.Corr]++
			}
		}
	}
	if n := missing(); n > 0 {
		t.Fatalf("%s: %d of %d dead letters never reported to their sender (got %v)", h.ID, n, len(want), got)
	}
	// a second report would come right behind the first: look once more
	r, err := h.Core.Poll(ctx, gid, bridge.PollRequest{Wait: 300 * time.Millisecond, Max: 500}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range r.Messages {
		if m.Kind == bridge.KindFailed {
			got[m.Corr]++
		}
	}
	return got
}

// reportedIn returns, for each msgId of want, the dead-letter records of
// every host that say its sender was told (by that host).
func reportedIn(t *testing.T, hosts []*memnettest.Host, want map[string]bool) map[string][]bridge.DeadLetterRecord {
	t.Helper()
	out := map[string][]bridge.DeadLetterRecord{}
	for _, h := range hosts {
		dl, err := h.Core.DeadLetters(10000)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range dl {
			if want[r.MsgID] && r.Reported {
				out[r.MsgID] = append(out[r.MsgID], r)
			}
		}
	}
	return out
}

// expiringReply injects into to's inbox a REPLY from gid on h, exactly as
// h's gateway signs and publishes one, except that it expires in 200 ms
// (a gateway's own are good for MessageTTL, a day): it returns its msgId.
func expiringReply(t *testing.T, c *memnettest.Cluster, h *memnettest.Host, gid, to, body string) string {
	t.Helper()
	now := time.Now()
	e := &bridge.Envelope{V: bridge.Version, Kind: bridge.KindReply, MsgID: uuid.NewString(), TraceID: uuid.NewString(), From: gid, To: to,
		Host: h.ID, TS: now, ExpiresAt: now.Add(200 * time.Millisecond), Body: []byte(body)}
	e.Sig = h.Key.Sign(e.SigningInput())
	if _, err := c.Net.Inject(memnet.ExchangeMsg, to, e.Headers(), e.Body); err != nil {
		t.Fatal(err)
	}
	return e.MsgID
}

// TestDeadLettersReachSenderFromAnyHost: replies expire in the inbox of a
// primary whose gateway is down. Whichever running gateway consumes each
// dead letter, its sender hears FAILED (corr = its msgId) exactly once,
// and the sender's host has it in its dead-letter log. Then the sender's
// own gateway is down too, so only a bystander consumes them: they wait
// as notices in the sender host's control queue and are reported once it
// is back.
func TestDeadLettersReachSenderFromAnyHost(t *testing.T) {
	const n = 10
	c := memnettest.New(t)
	a := c.Start("a")
	b := c.Start("b", func(cfg *bridge.Config) { cfg.InboxTTL = 200 * time.Millisecond })
	x := c.Start("c")
	lead := b.Register(t, "lead", bridge.RolePrimary)
	wa := a.Register(t, "wa", bridge.RoleWorker)
	wc := x.Register(t, "wc", bridge.RoleWorker)
	c.Converge(t)
	c.Stop(b)

	sent := map[*memnettest.Host]map[string]bool{a: {}, x: {}}
	for i := range n {
		sent[a][expiringReply(t, c, a, wa.GID, lead.GID, fmt.Sprint("reply ", i, " from a"))] = true
		sent[x][expiringReply(t, c, x, wc.GID, lead.GID, fmt.Sprint("reply ", i, " from c"))] = true
	}
	for h, gid := range map[*memnettest.Host]string{a: wa.GID, x: wc.GID} {
		for id, k := range failedFor(t, h, gid, sent[h]) {
			if k != 1 {
				t.Errorf("%s: %d FAILEDs about %s, want exactly 1", h.ID, k, id)
			}
		}
		for id, recs := range reportedIn(t, c.Hosts(), sent[h]) {
			if len(recs) != 1 {
				t.Errorf("%s: %d dead-letter records say they reported it, want 1: %+v", id, len(recs), recs)
			}
		}
		if got := reportedIn(t, []*memnettest.Host{h}, sent[h]); len(got) != n {
			t.Errorf("%s's dead-letter log has %d of its %d reported dead letters", h.ID, len(got), n)
		}
	}

	// the sender's gateway is down as well: only the bystander consumes
	c.Stop(a)
	down := map[string]bool{}
	for i := range n {
		down[expiringReply(t, c, a, wa.GID, lead.GID, fmt.Sprint("while a was down ", i))] = true
	}
	memnettest.Eventually(t, "the bystander forwarded every dead letter to a", func() bool {
		dl, err := x.Core.DeadLetters(10000)
		if err != nil {
			t.Fatal(err)
		}
		k := 0
		for _, r := range dl {
			if down[r.MsgID] && r.ForwardedTo == "a" && !r.Reported {
				k++
			}
		}
		return k == n
	})
	a = c.Restart(a)
	for id, k := range failedFor(t, a, wa.GID, down) {
		if k != 1 {
			t.Errorf("after a's restart: %d FAILEDs about %s, want exactly 1", k, id)
		}
	}
	recs := reportedIn(t, []*memnettest.Host{a}, down)
	for id := range down {
		if len(recs[id]) != 1 || recs[id][0].ConsumedBy != "c" {
			t.Errorf("a's dead-letter log for %s: %+v, want one reported record consumed by c", id, recs[id])
		}
	}
}

// TestDeadLetterToOlderGateway: a sender host whose heartbeat shows a
// gateway older than dead-letter notices (no deadLetterNotices in its
// _gateway entry, as during an upgrade) is told of a dead letter a
// bystander consumed the old way: a FAILED from the bystander's gateway
// straight into the sender's inbox, once, which the sender's gateway
// delivers when it is back.
func TestDeadLetterToOlderGateway(t *testing.T) {
	const n = 5
	c := memnettest.New(t)
	a := c.Start("a")
	b := c.Start("b", func(cfg *bridge.Config) { cfg.InboxTTL = 200 * time.Millisecond })
	x := c.Start("c", func(cfg *bridge.Config) { cfg.PresenceTTL = time.Minute }) // keeps a's entry while a is down
	lead := b.Register(t, "lead", bridge.RolePrimary)
	wa := a.Register(t, "wa", bridge.RoleWorker)
	c.Converge(t)
	c.Stop(b)
	c.Stop(a)

	// a's last heartbeat, as an older gateway of a writes it (and with no
	// key fingerprint, to tell it from the real ones in c's roster)
	t0 := time.Now()
	body := fmt.Sprintf(`{"gid":%q,"name":%q,"host":"a"}`, bridge.GatewayGID("a"), bridge.GatewayName)
	beat := &bridge.Envelope{V: bridge.Version, Kind: bridge.KindPresence, MsgID: uuid.NewString(), From: bridge.GatewayGID("a"),
		To: "roster.a." + bridge.GatewayName, Host: "a", TS: t0, ExpiresAt: t0.Add(time.Minute), Body: []byte(body)}
	beat.Sig = a.Key.Sign(beat.SigningInput())
	if _, err := c.Net.Inject(memnet.ExchangeRoster, "roster.a", beat.Headers(), beat.Body); err != nil {
		t.Fatal(err)
	}
	memnettest.Eventually(t, "c heard a's older gateway", func() bool {
		for _, h := range x.Core.Roster().Hosts {
			if h.Host == "a" && h.Key == "" {
				return true
			}
		}
		return false
	})
	sent := map[string]bool{}
	for i := range n {
		sent[expiringReply(t, c, a, wa.GID, lead.GID, fmt.Sprint("to an older gateway ", i))] = true
	}
	memnettest.Eventually(t, "c reported every dead letter of a's itself", func() bool {
		return len(reportedIn(t, []*memnettest.Host{x}, sent)) == n
	})
	a = c.Restart(a)
	for id, k := range failedFor(t, a, wa.GID, sent) {
		if k != 1 {
			t.Errorf("%d FAILEDs about %s, want exactly 1", k, id)
		}
	}
}

// logCounter counts the records logged with message msg.
type logCounter struct {
	msg string
	n   *atomic.Int64
}

func (h logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h logCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.n.Add(1)
	}
	return nil
}
func (h logCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h logCounter) WithGroup(string) slog.Handler      { return h }

// TestDeadLetterNoticeChecked: a DEAD_LETTER from a trusted gateway is
// only that gateway's word. The sender's gateway reports nothing for a
// notice whose envelope is not yet expired, not signed by it, died by
// another reason, or is not the message its corr names; a valid notice
// sent twice is reported once.
func TestDeadLetterNoticeChecked(t *testing.T) {
	var dropped atomic.Int64
	c := memnettest.New(t)
	a := c.Start("a", func(cfg *bridge.Config) {
		cfg.Logger = slog.New(logCounter{msg: "dead-letter notice not reported", n: &dropped})
	})
	x := c.Start("c")
	wa := a.Register(t, "wa", bridge.RoleWorker)
	c.Converge(t)

	reply := func(ttl time.Duration, signer *memnettest.Host) *bridge.Envelope {
		now := time.Now()
		e := &bridge.Envelope{V: bridge.Version, Kind: bridge.KindReply, MsgID: uuid.NewString(), From: wa.GID, To: uuid.NewString(),
			Host: "a", TS: now.Add(-time.Second), ExpiresAt: now.Add(ttl), Body: []byte("r")}
		e.Sig = signer.Key.Sign(e.SigningInput())
		return e
	}
	notify := func(reason string, e *bridge.Envelope, corr string) {
		t.Helper()
		raw, err := json.Marshal(bridge.NoticeOf(bridge.DeadLetter{Reason: reason, Queue: "agent." + e.To + ".inbox.v2", At: time.Now()}, e))
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		n := &bridge.Envelope{V: bridge.Version, Kind: bridge.KindDeadLetter, MsgID: uuid.NewString(), From: bridge.GatewayGID("c"),
			To: "control.a", Host: "c", Corr: corr, TS: now, ExpiresAt: now.Add(time.Hour), Body: raw}
		n.Sig = x.Key.Sign(n.SigningInput())
		if _, err := c.Net.Inject(memnet.ExchangeControl, "a", n.Headers(), n.Body); err != nil {
			t.Fatal(err)
		}
	}
	bad := map[string]*bridge.Envelope{
		"not expired yet":        reply(time.Hour, a),
		"signed by c, not by a":  reply(-time.Millisecond, x),
		"died by another reason": reply(-time.Millisecond, a),
		"corr names another":     reply(-time.Millisecond, a),
	}
	for name, e := range bad {
		reason, corr := bridge.ReasonExpired, e.MsgID
		switch name {
		case "died by another reason":
			reason = bridge.ReasonRejected
		case "corr names another":
			corr = uuid.NewString()
		}
		notify(reason, e, corr)
	}
	good := reply(-time.Millisecond, a)
	notify(bridge.ReasonExpired, good, good.MsgID)
	notify(bridge.ReasonExpired, good, good.MsgID) // a second gateway, or a replay, says it again
	got := failedFor(t, a, wa.GID, map[string]bool{good.MsgID: true})
	memnettest.Eventually(t, "a dropped the bad notices and the repeat", func() bool { return dropped.Load() == int64(len(bad))+1 })
	got2 := failedFor(t, a, wa.GID, map[string]bool{})
	for id, k := range got2 {
		got[id] += k
	}
	if len(got) != 1 || got[good.MsgID] != 1 {
		t.Errorf("FAILEDs by msgId: %v, want exactly one, about %s", got, good.MsgID)
	}
}
