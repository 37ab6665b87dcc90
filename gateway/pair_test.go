package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker"
	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/keys"
	"github.com/herdbridge/herdbridge/keys/pairing"
)

// openPairing is `herdbridge pair` on the state dir and host of cfg.
func openPairing(t *testing.T, cfg gateway.Config, tune ...func(*gateway.PairConfig)) *gateway.Pairing {
	t.Helper()
	pc := gateway.PairConfig{StateDir: cfg.StateDir, Host: cfg.Host, Broker: cfg.Broker, Logger: gatewaytest.Logger(),
		StepWait: 10 * time.Second}
	for _, f := range tune {
		f(&pc)
	}
	p, err := gateway.OpenPairing(context.Background(), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

type offerDone struct {
	res pairing.Result
	err error
}

// offer opens p's code and waits for a joiner in the background.
func offer(t *testing.T, p *gateway.Pairing) (*pairing.Offer, <-chan offerDone) {
	t.Helper()
	o, err := p.Offer(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	done := make(chan offerDone, 1)
	go func() { r, err := o.Wait(context.Background()); done <- offerDone{r, err} }()
	return o, done
}

// trustedKeys is the trust file of cfg's state dir.
func trustedKeys(t *testing.T, cfg gateway.Config) map[string][]ed25519Key {
	t.Helper()
	m, err := keys.ReadTrust(filepath.Join(cfg.StateDir, keys.TrustFile))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]ed25519Key{}
	for h, ks := range m {
		for _, k := range ks {
			out[h] = append(out[h], ed25519Key(keys.Fingerprint(k)))
		}
	}
	return out
}

// wrongCode is c with its last (secret) character changed.
func wrongCode(t *testing.T, c pairing.Code) pairing.Code {
	t.Helper()
	b := []byte(c)
	if b[len(b)-1] == '7' {
		b[len(b)-1] = '3'
	} else {
		b[len(b)-1] = '7'
	}
	bad, err := pairing.ParseCode(string(b))
	if err != nil || bad == c {
		t.Fatalf("wrong code of %s: %q %v", c, bad, err)
	}
	return bad
}

type ed25519Key string // a fingerprint

func fingerprintOf(t *testing.T, cfg gateway.Config) ed25519Key {
	t.Helper()
	k, err := keys.Load(filepath.Join(cfg.StateDir, keys.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	return ed25519Key(k.Fingerprint())
}

// TestPairThenSignedExchangeBothWays: two gateways on the broker that
// trust nobody; `pair` on A, `pair CODE` on B; then each trust file holds
// the other's key, the running gateways pick it up from their files, and a
// signed message goes each way.
func TestPairThenSignedExchangeBothWays(t *testing.T) {
	url := brokerURL(t)
	cfgA := gatewaytest.HostConfig(t, gatewaytest.UniqueHost("pa"), url)
	cfgB := gatewaytest.HostConfig(t, gatewaytest.UniqueHost("pb"), url)
	ga, gb := gatewaytest.Start(t, cfgA), gatewaytest.Start(t, cfgB)
	if n := len(trustedKeys(t, cfgA)) + len(trustedKeys(t, cfgB)); n != 0 {
		t.Fatalf("%d hosts trusted before pairing, want none", n)
	}
	ctx := context.Background()
	for _, r := range []struct {
		g    *gateway.Gateway
		name string
		role bridge.Role
	}{{ga, "wa", bridge.RoleWorker}, {ga, "pa", bridge.RolePrimary}, {gb, "wb", bridge.RoleWorker}, {gb, "pb", bridge.RolePrimary}} {
		if _, _, err := r.g.Core().Register(ctx, bridge.RegisterRequest{Name: r.name, Role: r.role}); err != nil {
			t.Fatal(err)
		}
	}

	pa, pb := openPairing(t, cfgA), openPairing(t, cfgB)
	o, done := offer(t, pa)
	res, err := pb.Join(ctx, o.Code())
	if err != nil {
		t.Fatalf("join: %v", err)
	}
	if res.Peer != cfgA.Host {
		t.Fatalf("B paired with %q, want %q", res.Peer, cfgA.Host)
	}
	d := <-done
	if d.err != nil || d.res.Peer != cfgB.Host || d.res.Failures != 0 {
		t.Fatalf("A: %+v %v", d.res, d.err)
	}
	if got := trustedKeys(t, cfgA)[cfgB.Host]; len(got) != 1 || got[0] != fingerprintOf(t, cfgB) {
		t.Fatalf("A trusts B as %v, want B's key", got)
	}
	if got := trustedKeys(t, cfgB)[cfgA.Host]; len(got) != 1 || got[0] != fingerprintOf(t, cfgA) {
		t.Fatalf("B trusts A as %v, want A's key", got)
	}

	// the running gateways reload their trust files themselves; each has
	// the other's key once it accepts the other's signed presence
	gatewaytest.Eventually(t, 15*time.Second, "A accepts B's presence", func() bool {
		_, err := ga.Core().Resolve("pb@" + cfgB.Host)
		return err == nil
	})
	gatewaytest.Eventually(t, 15*time.Second, "B accepts A's presence", func() bool {
		_, err := gb.Core().Resolve("pa@" + cfgA.Host)
		return err == nil
	})
	gatewaytest.CrossHostSend(t, ga, gb, "wa", "pb", "signed A to B after pairing")
	gatewaytest.CrossHostSend(t, gb, ga, "wb", "pa", "signed B to A after pairing")
}

// TestPairWrongCodeRefusedCounted: a joiner with a wrong code is refused,
// the initiator counts it, and neither trust file gains a key; the right
// code then still pairs, reporting the one failure.
func TestPairWrongCodeRefusedCounted(t *testing.T) {
	url := brokerURL(t)
	cfgA := gatewaytest.HostConfig(t, gatewaytest.UniqueHost("wa"), url)
	cfgB := gatewaytest.HostConfig(t, gatewaytest.UniqueHost("wb"), url)
	pa, pb := openPairing(t, cfgA), openPairing(t, cfgB)
	o, done := offer(t, pa)
	if _, err := pb.Join(context.Background(), wrongCode(t, o.Code())); !errors.Is(err, pairing.ErrWrongCode) {
		t.Fatalf("join with a wrong code: %v, want ErrWrongCode", err)
	}
	if a, b := trustedKeys(t, cfgA), trustedKeys(t, cfgB); len(a)+len(b) != 0 {
		t.Fatalf("a wrong code pinned keys: A %v, B %v", a, b)
	}
	if _, err := pb.Join(context.Background(), o.Code()); err != nil {
		t.Fatalf("join with the right code after a wrong one: %v", err)
	}
	d := <-done
	if d.err != nil || d.res.Failures != 1 {
		t.Fatalf("A: %+v %v; want paired after 1 counted failure", d.res, d.err)
	}
	// the code worked once
	if _, err := pb.Join(context.Background(), o.Code()); err == nil || !strings.Contains(err.Error(), "no pairing waits") {
		t.Fatalf("a used code: %v", err)
	}
}

// TestPairReplayRefused: an onlooker with its own login on the broker
// binds a queue to bridge.pair under the initiator's address and copies a
// joiner's messages. It learns nothing of the code's secret, and the hello
// it replays is refused and counted; nothing is pinned.
func TestPairReplayRefused(t *testing.T) {
	url := brokerURL(t)
	cfgA := gatewaytest.HostConfig(t, gatewaytest.UniqueHost("ra"), url)
	cfgB := gatewaytest.HostConfig(t, gatewaytest.UniqueHost("rb"), url)
	pa := openPairing(t, cfgA, func(c *gateway.PairConfig) { c.MaxFailures = 2 })
	pb := openPairing(t, cfgB)
	o, done := offer(t, pa)

	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	spy, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(spy.Name, pairing.InitiatorAddr(o.Code()), broker.ExchangePair, false, nil); err != nil {
		t.Fatal(err)
	}
	seen, err := ch.Consume(spy.Name, "", true, true, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}

	if _, err := pb.Join(context.Background(), wrongCode(t, o.Code())); !errors.Is(err, pairing.ErrWrongCode) {
		t.Fatalf("join with a wrong code: %v", err)
	}
	var hello []byte
	secret := string(o.Code())[pairing.NameplateLen:]
	for hello == nil {
		select {
		case m := <-seen:
			if bytes.Contains(bytes.ToUpper(m.Body), []byte(secret)) {
				t.Fatalf("the code's secret travelled: %s", m.Body)
			}
			if bytes.Contains(m.Body, []byte(`"t":"hello"`)) {
				hello = m.Body
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the onlooker saw no hello")
		}
	}
	if err := ch.PublishWithContext(context.Background(), broker.ExchangePair, pairing.InitiatorAddr(o.Code()), false, false,
		amqp.Publishing{Body: hello}); err != nil {
		t.Fatal(err)
	}
	d := <-done
	if !errors.Is(d.err, pairing.ErrTooManyTries) || d.res.Failures != 2 || !strings.Contains(d.err.Error(), "replayed") {
		t.Fatalf("A: %+v %v; want 2 counted failures, the last a replay", d.res, d.err)
	}
	if a, b := trustedKeys(t, cfgA), trustedKeys(t, cfgB); len(a)+len(b) != 0 {
		t.Fatalf("keys pinned: A %v, B %v", a, b)
	}
}
