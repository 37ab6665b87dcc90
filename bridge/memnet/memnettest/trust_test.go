package memnettest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/memnet/memnettest"
)

// peer is host's view of other in its Peers (zero when absent).
func peer(h *memnettest.Host, other string) bridge.PeerView {
	for _, p := range h.Core.Peers() {
		if p.Host == other {
			return p
		}
	}
	return bridge.PeerView{}
}

// rosterTrust is the trust flag h's roster shows for host.
func rosterTrust(h *memnettest.Host, host string) (trust, why string) {
	for _, v := range h.Core.Roster().Hosts {
		if v.Host == host {
			return v.Trust, v.Why
		}
	}
	return "", ""
}

// TestTrustBothWays: hosts that trust each other each see the other's
// trust list name their key: both, with a skew measured and a heartbeat.
func TestTrustBothWays(t *testing.T) {
	c := memnettest.New(t, "a", "b")
	a, b := c.Hosts()[0], c.Hosts()[1]
	c.Converge(t)
	memnettest.Eventually(t, "a and b trust each other both ways", func() bool {
		return peer(a, "b").Trust == bridge.TrustBoth && peer(b, "a").Trust == bridge.TrustBoth
	})
	p := peer(a, "b")
	if !p.WeTrust || p.TrustsUs != bridge.TrustYes || p.Key != b.Key.Fingerprint() || p.SkewMs == nil || p.LastHeartbeat == nil || p.SkewRefused {
		t.Fatalf("a's view of b: %+v", p)
	}
	if skew := time.Duration(*p.SkewMs) * time.Millisecond; skew > 5*time.Second || skew < -5*time.Second {
		t.Fatalf("skew between two cores on one clock: %v", skew)
	}
	if tr, _ := rosterTrust(a, "b"); tr != bridge.TrustBoth {
		t.Fatalf("a's roster flags b %q, want both", tr)
	}
	if tr, _ := rosterTrust(a, "a"); tr != "" {
		t.Fatalf("a's roster flags itself %q", tr)
	}
}

// TestOneWayTrustFailsFast: b stops trusting a. a sees it in b's signed
// trust list: its roster flags b one-way, and a send to an entity on b
// fails at once with the reason instead of confirmed (b would refuse it
// unseen as unknown-host). b lists a as untrusted, from the heartbeats it
// refuses. Trusting a again heals both.
func TestOneWayTrustFailsFast(t *testing.T) {
	c := memnettest.New(t, "a", "b")
	a, b := c.Hosts()[0], c.Hosts()[1]
	w := a.Register(t, "w", bridge.RoleWorker)
	lead := b.Register(t, "lead", bridge.RolePrimary)
	c.Converge(t)
	c.Distrust(b, "a")
	memnettest.Eventually(t, "a sees that b does not trust it", func() bool { return peer(a, "b").Trust == bridge.TrustOneWay })
	if tr, why := rosterTrust(a, "b"); tr != bridge.TrustOneWay || !strings.Contains(why, "keys trust a") {
		t.Fatalf("a's roster flags b %q (%s), want one-way with the fix", tr, why)
	}
	res, err := a.Core.Send(context.Background(), w.GID, bridge.SendRequest{Target: "lead@b", Message: "lost?"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != bridge.StatusFailed || !strings.Contains(res.Reason, "b does not trust this host (a)") || res.MsgID != "" {
		t.Fatalf("send to a host that does not trust the sender: %+v", res)
	}
	memnettest.Eventually(t, "b lists a as untrusted", func() bool {
		tr, why := rosterTrust(b, "a")
		return tr == bridge.TrustUntrusted && strings.Contains(why, "keys trust a KEY")
	})
	if p := peer(b, "a"); p.WeTrust || p.Key != a.Key.Fingerprint() {
		t.Fatalf("b's view of a: %+v", p)
	}

	c.Trust("a", a.Key.Public()) // b trusts a again
	memnettest.Eventually(t, "a sees b trust it again", func() bool { return peer(a, "b").Trust == bridge.TrustBoth })
	res, err = a.Core.Send(context.Background(), w.GID, bridge.SendRequest{Target: "lead@b", Message: "found"}, nil)
	if err != nil || res.Status != bridge.StatusConfirmed {
		t.Fatalf("send after trust is restored: %+v, %v", res, err)
	}
	memnettest.Eventually(t, "the message reaches lead", func() bool {
		r, err := b.Core.Poll(context.Background(), lead.GID, bridge.PollRequest{Max: 10}, nil)
		return err == nil && len(r.Messages) == 1 && r.Messages[0].Body == "found"
	})
}

// TestOlderPeerTrustUnknown: a peer whose heartbeat carries no trust list
// (a gateway of the previous version) is "unknown", never "untrusted",
// and sends to it are not failed.
func TestOlderPeerTrustUnknown(t *testing.T) {
	c := memnettest.New(t, "a")
	a := c.Hosts()[0]
	w := a.Register(t, "w", bridge.RoleWorker)
	old := c.Start("old", func(cfg *bridge.Config) { cfg.Trusted = nil })
	old.Register(t, "lead", bridge.RolePrimary)
	c.Converge(t)
	p := peer(a, "old")
	if p.Trust != bridge.TrustUnknown || p.TrustsUs != bridge.TrustUnknown || !p.WeTrust || !strings.Contains(p.Why, "no trust list") {
		t.Fatalf("a's view of an older peer: %+v", p)
	}
	res, err := a.Core.Send(context.Background(), w.GID, bridge.SendRequest{Target: "lead@old", Message: "hi"}, nil)
	if err != nil || res.Status != bridge.StatusConfirmed {
		t.Fatalf("send to an older peer: %+v, %v", res, err)
	}
}

// TestClockSkewMeasured: a peer whose clock runs 5 minutes ahead has every
// heartbeat refused as future-ts; its skew is still measured from them
// (they are signed) and flagged as refused.
func TestClockSkewMeasured(t *testing.T) {
	c := memnettest.New(t, "a")
	a := c.Hosts()[0]
	c.Start("fast", func(cfg *bridge.Config) { cfg.Now = func() time.Time { return time.Now().Add(5 * time.Minute) } })
	memnettest.Eventually(t, "a measures fast's clock", func() bool { return peer(a, "fast").SkewMs != nil })
	p := peer(a, "fast")
	skew := time.Duration(*p.SkewMs) * time.Millisecond
	if skew < 4*time.Minute || skew > 6*time.Minute || !p.SkewRefused || p.LastHeartbeat != nil {
		t.Fatalf("a's view of a host 5 minutes ahead: skew %v, %+v", skew, p)
	}
	if a.Core.Refused()[bridge.RefuseFuture] == 0 {
		t.Fatalf("its heartbeats were not refused as future-ts: %v", a.Core.Refused())
	}
}

// TestAnswerToDistrustingHostFailsFast: w on b asks lead on a; then b
// stops trusting a. lead's answer fails at once with the reason (b would
// refuse it unseen), and the turn stays open: once b trusts a again, the
// same answer is delivered.
func TestAnswerToDistrustingHostFailsFast(t *testing.T) {
	c := memnettest.New(t, "a", "b")
	a, b := c.Hosts()[0], c.Hosts()[1]
	lead, w := a.Register(t, "lead", bridge.RolePrimary), b.Register(t, "w", bridge.RoleWorker)
	c.Converge(t)
	turn := crossAsk(t, a, b, lead, w)
	c.Distrust(b, "a")
	memnettest.Eventually(t, "a sees that b does not trust it", func() bool { return peer(a, "b").Trust == bridge.TrustOneWay })
	res, err := a.Core.Send(ctx, lead.GID, bridge.SendRequest{Message: "postgres", TurnID: turn}, nil)
	if err != nil || res.Status != bridge.StatusFailed || !strings.Contains(res.Reason, "b does not trust this host (a)") {
		t.Fatalf("answer to a host that does not trust a: %+v, %v", res, err)
	}
	c.Trust("a", a.Key.Public())
	memnettest.Eventually(t, "a sees b trust it again", func() bool { return peer(a, "b").Trust == bridge.TrustBoth })
	res, err = a.Core.Send(ctx, lead.GID, bridge.SendRequest{Message: "postgres", TurnID: turn}, nil)
	if err != nil || res.Status != bridge.StatusDelivered {
		t.Fatalf("answer once trusted again: %+v, %v; want delivered", res, err)
	}
	answered(t, b, w, turn, "postgres")
}
