package gateway_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker/brokertest"
	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/herdr/herdrtest"
	"github.com/herdbridge/herdbridge/keys"
)

func doctor(g *gateway.Gateway) gateway.DoctorResult {
	return gateway.Doctor(context.Background(), gateway.DoctorOptions{StateDir: g.StateDir()})
}

// check is the doctor line named name (zero when absent).
func check(res gateway.DoctorResult, name string) gateway.Check {
	for _, c := range res.Checks {
		if c.Name == name {
			return c
		}
	}
	return gateway.Check{}
}

// notOK lists the lines that are not ok.
func notOK(res gateway.DoctorResult) []gateway.Check {
	var out []gateway.Check
	for _, c := range res.Checks {
		if c.Status != gateway.CheckOK {
			out = append(out, c)
		}
	}
	return out
}

// wantFail waits until doctor fails name with a fix containing fix, and
// the whole run is not OK (the command exits non-zero).
func wantFail(t *testing.T, g *gateway.Gateway, name, fix string) gateway.Check {
	t.Helper()
	var res gateway.DoctorResult
	gatewaytest.Eventually(t, 15*time.Second, "doctor fails "+name, func() bool {
		res = doctor(g)
		c := check(res, name)
		return c.Status == gateway.CheckFail && strings.Contains(c.Fix, fix) && !res.OK
	})
	c := check(res, name)
	t.Logf("%s: %s — fix: %s", c.Name, c.Detail, c.Fix)
	return c
}

// healthyPair starts hosts A (with a fake herdr and a worker in one of
// its panes) and B on the broker, trusting each other, and waits until
// doctor on A passes every check.
func healthyPair(t *testing.T) (ga, gb *gateway.Gateway, fake *herdrtest.Server) {
	t.Helper()
	url := brokerURL(t)
	fake = herdrtest.New(t)
	pane := fake.AddAgent(herdrtest.PaneOptions{Agent: "claude"})
	hostA, hostB := gatewaytest.UniqueHost("da"), gatewaytest.UniqueHost("db")
	ga = gatewaytest.StartHost(t, hostA, url, func(c *gateway.Config) {
		c.File.Herdr.Disabled = false
		c.File.Herdr.Socket = fake.SocketPath()
	})
	gb = gatewaytest.StartHost(t, hostB, url)
	if _, _, err := ga.Core().Register(context.Background(), bridge.RegisterRequest{Name: "w", Role: bridge.RoleWorker, PaneID: pane}); err != nil {
		t.Fatal(err)
	}
	var res gateway.DoctorResult
	gatewaytest.Eventually(t, 15*time.Second, "doctor on A passes every check", func() bool {
		res = doctor(ga)
		return res.OK && len(notOK(res)) == 0 && check(res, "trust "+hostB).Status == gateway.CheckOK && check(res, "clock "+hostB).Status == gateway.CheckOK
	})
	for _, name := range []string{"gateway", "state dir", "stores", "host key", "trust file", "herdr", "herdr panes", "broker", "broker topology", "broker login"} {
		if check(res, name).Status != gateway.CheckOK {
			t.Fatalf("healthy: %s is %+v; all: %+v", name, check(res, name), res.Checks)
		}
	}
	return ga, gb, fake
}

// TestDoctorHealthyThenFaults: a healthy pair passes; then each fault
// alone (a private file readable by others, herdr's socket gone) fails its
// check with the fix.
func TestDoctorHealthyThenFaults(t *testing.T) {
	ga, _, fake := healthyPair(t)

	trust := filepath.Join(ga.StateDir(), keys.TrustFile)
	if err := os.Chmod(trust, 0o644); err != nil {
		t.Fatal(err)
	}
	wantFail(t, ga, "state dir", "chmod 600 "+trust)
	if err := os.Chmod(trust, 0o600); err != nil {
		t.Fatal(err)
	}
	if res := doctor(ga); !res.OK {
		t.Fatalf("modes restored, still failing: %+v", notOK(res))
	}

	fake.Close()
	wantFail(t, ga, "herdr", "start herdr")
}

// TestDoctorGatewayDown: with no gateway, doctor says so, and still
// checks the files (the stores, the keys, the modes).
func TestDoctorGatewayDown(t *testing.T) {
	dir := gatewaytest.TempDir(t)
	g := gatewaytest.StartLocal(t, dir)
	g.Close()
	res := gateway.Doctor(context.Background(), gateway.DoctorOptions{StateDir: dir})
	if c := check(res, "gateway"); c.Status != gateway.CheckFail || !strings.Contains(c.Fix, "herdbridge gateway --state-dir "+dir) || res.OK {
		t.Fatalf("gateway down: %+v", res.Checks)
	}
	for _, name := range []string{"state dir", "stores", "host key", "trust file"} {
		if c := check(res, name); c.Status != gateway.CheckOK {
			t.Fatalf("gateway down: %s: %+v", name, c)
		}
	}
	if c := check(res, "broker"); c.Status != gateway.CheckWarn {
		t.Fatalf("gateway down, no --broker: broker %+v", c)
	}
	res = gateway.Doctor(context.Background(), gateway.DoctorOptions{StateDir: dir, Broker: brokerURL(t)})
	if c := check(res, "broker"); c.Status != gateway.CheckOK {
		t.Fatalf("gateway down, --broker probed: %+v", c)
	}
	res = gateway.Doctor(context.Background(), gateway.DoctorOptions{StateDir: dir, Broker: "amqp://guest:guest@127.0.0.1:1/"})
	if c := check(res, "broker"); c.Status != gateway.CheckFail {
		t.Fatalf("gateway down, --broker nobody listens on: %+v", c)
	}
}

// TestDoctorBrokerDown: the gateway's broker dies: doctor fails the
// broker check with the fix.
func TestDoctorBrokerDown(t *testing.T) {
	b := brokertest.StartPrivate(t)
	host := gatewaytest.UniqueHost("dk")
	g := gatewaytest.StartHost(t, host, b.URL)
	gatewaytest.Eventually(t, 15*time.Second, "doctor passes with the broker up", func() bool {
		res := doctor(g)
		return res.OK && check(res, "broker login").Status == gateway.CheckOK
	})
	b.Kill(t)
	wantFail(t, g, "broker", "start RabbitMQ")
}

// TestDoctorOneWayTrust: B does not trust A. Doctor on A fails "trust B"
// (one-way, read from B's signed heartbeat) with the fix to run on B;
// doctor on B fails "trust A" (untrusted); and a send from A to an entity
// on B fails at once with the reason instead of confirmed.
func TestDoctorOneWayTrust(t *testing.T) {
	url := brokerURL(t)
	hostA, hostB := gatewaytest.UniqueHost("oa"), gatewaytest.UniqueHost("ob")
	ga := gatewaytest.StartHost(t, hostA, url)
	gb := gatewaytest.StartHost(t, hostB, url)
	w := gatewaytest.RegisterOn(t, ga, "w", bridge.RoleWorker)
	gatewaytest.RegisterOn(t, gb, "lead", bridge.RolePrimary)
	target := "lead@" + hostB
	gatewaytest.Eventually(t, 10*time.Second, hostA+" sees "+target, func() bool { _, err := ga.Core().Resolve(target); return err == nil })
	if _, err := keys.Revoke(filepath.Join(gb.StateDir(), keys.TrustFile), hostA, nil); err != nil {
		t.Fatal(err)
	}
	if err := gb.ReloadTrust(); err != nil {
		t.Fatal(err)
	}
	c := wantFail(t, ga, "trust "+hostB, "keys trust "+hostA)
	if !strings.Contains(c.Detail, "one-way") {
		t.Fatalf("A's trust line for B: %+v", c)
	}
	wantFail(t, gb, "trust "+hostA, "keys trust "+hostA+" KEY")

	res, err := ga.Core().Send(context.Background(), w.GID, bridge.SendRequest{Target: target, Message: "would be lost"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != bridge.StatusFailed || !strings.Contains(res.Reason, hostB+" does not trust this host") || res.MsgID != "" {
		t.Fatalf("send to a host that does not trust the sender: %+v", res)
	}
	for _, h := range ga.Core().Roster().Hosts {
		if h.Host == hostB && h.Trust != bridge.TrustOneWay {
			t.Fatalf("A's roster flags B %q", h.Trust)
		}
	}
}

// TestDoctorClockSkew: B's clock runs 5 minutes ahead. Every heartbeat of
// B is refused by A as future-ts, and doctor on A fails "clock B", past
// the 2-minute allowance, with the fix.
func TestDoctorClockSkew(t *testing.T) {
	url := brokerURL(t)
	hostA, hostB := gatewaytest.UniqueHost("ca"), gatewaytest.UniqueHost("cb")
	ga := gatewaytest.StartHost(t, hostA, url)
	gatewaytest.StartHost(t, hostB, url, func(c *gateway.Config) {
		c.Core.Now = func() time.Time { return time.Now().Add(5 * time.Minute) }
	})
	c := wantFail(t, ga, "clock "+hostB, "NTP")
	if !strings.Contains(c.Detail, "ahead of this clock") || !strings.Contains(c.Detail, "allowance") {
		t.Fatalf("clock line: %+v", c)
	}
}
