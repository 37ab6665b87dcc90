package gateway_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker"
	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/keys"
)

// TestKeyRotationKeepsInFlight: host A rotates its key while 100 of its
// replies wait, signed with the old key, in host B's inbox (B's prefetch is
// 1: the backlog stays on the broker, verified only as it is drained).
// The documented order — rotate, trust the new key on B, restart A — drops
// nothing: B, back up, verifies the 100 old-signed and 100 new-signed
// replies. After B revokes the old key, a message signed with it is refused.
func TestKeyRotationKeepsInFlight(t *testing.T) {
	url := brokerURL(t)
	const n = 100
	hostA, hostB := gatewaytest.UniqueHost("ka"), gatewaytest.UniqueHost("kb")
	dirA, dirB := gatewaytest.TempDir(t), gatewaytest.TempDir(t)
	at := func(dir string, ttl time.Duration) func(*gateway.Config) {
		return func(c *gateway.Config) { c.StateDir = dir; c.Core.PresenceTTL = ttl; c.Core.Prefetch = 1 }
	}
	ga := gatewaytest.StartHost(t, hostA, url, at(dirA, time.Minute))
	gb := gatewaytest.StartHost(t, hostB, url, at(dirB, time.Minute))
	ctx := context.Background()
	lead := gatewaytest.RegisterOn(t, gb, "lead", bridge.RolePrimary)
	w := gatewaytest.RegisterOn(t, ga, "w", bridge.RoleWorker)
	target := "lead@" + hostB
	gatewaytest.Eventually(t, 10*time.Second, "each sees the other", func() bool {
		_, e1 := ga.Core().Resolve(target)
		_, e2 := gb.Core().Resolve("w@" + hostA)
		return e1 == nil && e2 == nil
	})
	send := func(g *gateway.Gateway, from, prefix string) {
		for i := 0; i < n; i++ {
			if _, err := g.Core().Send(ctx, from, bridge.SendRequest{Target: target, Message: fmt.Sprintf("%s-%03d", prefix, i)}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	send(ga, w.GID, "old")

	oldKey, err := keys.Load(filepath.Join(dirA, keys.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	newKey, err := keys.Rotate(dirA, hostA)
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.Trust(filepath.Join(dirB, keys.TrustFile), hostA, newKey.Public()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * gatewaytest.TrustReload) // B's running gateway picks the new key up
	ga.Close()
	ga = gatewaytest.StartHost(t, hostA, url, at(dirA, time.Minute)) // signs with the new key now
	wg, err := ga.Core().Resolve("w")
	if err != nil {
		t.Fatal(err)
	}
	gatewaytest.Eventually(t, 10*time.Second, "restarted A sees lead", func() bool { _, err := ga.Core().Resolve(target); return err == nil })
	send(ga, wg.GID, "new")

	got := map[string]bool{}
	for deadline := time.Now().Add(20 * time.Second); len(got) < 2*n && time.Now().Before(deadline); {
		r, err := gb.Core().Poll(ctx, lead.GID, bridge.PollRequest{Max: 500, Wait: time.Second}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range r.Messages {
			got[m.Body] = true
		}
	}
	t.Logf("rotation with %d replies in flight under the old key and %d sent under the new: %d arrived, refusals %v", n, n, len(got), gb.Core().Refused())
	if len(got) != 2*n || len(gb.Core().Refused()) != 0 {
		t.Fatalf("%d of %d arrived; refusals %v", len(got), 2*n, gb.Core().Refused())
	}

	// revoke the old key on B: what it signs is refused from now on
	if _, err := keys.Revoke(filepath.Join(dirB, keys.TrustFile), hostA, oldKey.Public()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * gatewaytest.TrustReload)
	now := time.Now()
	e := &bridge.Envelope{V: bridge.Version, Kind: bridge.KindReply, MsgID: uuid.NewString(), From: wg.GID, To: lead.GID, Host: hostA, TS: now, ExpiresAt: now.Add(time.Hour), Body: []byte("old key, after revoke")}
	e.Sig = oldKey.Sign(e.SigningInput())
	ch := rawChannel(t, url)
	if err := ch.PublishWithContext(ctx, broker.ExchangeMsg, lead.GID, true, false, amqp.Publishing{Headers: amqp.Table(e.Headers()), Body: e.Body}); err != nil {
		t.Fatal(err)
	}
	gatewaytest.Eventually(t, 10*time.Second, "old-key message refused after revoke", func() bool {
		return gb.Core().Refused()[bridge.RefuseBadSignature] == 1
	})
	if _, err := os.Stat(filepath.Join(dirA, keys.RetiredDir)); err != nil {
		t.Fatalf("retired keys: %v", err)
	}
}
