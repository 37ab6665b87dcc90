package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker"
	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// TestFullInboxRejectPublish: with the inboxes declared x-overflow
// reject-publish — what a gateway does on LavinMQ, whose
// reject-publish-dlx drops the oldest message; forced here on RabbitMQ —
// a send into a full inbox on another host fails at once saying so, the
// refused message is in the dead-letter log (reason maxlen, that inbox),
// and nothing already in the inbox is dropped: its entity gets every one
// once its gateway is back. doctor shows the broker and the mode.
//
// On quorum queues as well (always reject-publish there): the cap holds
// for one sender waiting for each confirm, and the dead letter names the
// .v3 inbox.
func TestFullInboxRejectPublish(t *testing.T) {
	for _, qtype := range []string{broker.QueueTypeClassic, broker.QueueTypeQuorum} {
		t.Run(qtype, func(t *testing.T) { testFullInboxRejectPublish(t, qtype) })
	}
}

func testFullInboxRejectPublish(t *testing.T, qtype string) {
	url := brokerURL(t)
	const capacity = 3
	hostA, hostB, dirB := gatewaytest.UniqueHost("fa"), gatewaytest.UniqueHost("fb"), gatewaytest.TempDir(t)
	tune := func(more func(*gateway.Config)) func(*gateway.Config) {
		return func(c *gateway.Config) {
			c.File.BrokerOverflow = broker.OverflowRejectPublish
			c.Core.InboxMaxLength = capacity
			c.QueueType = qtype
			more(c)
		}
	}
	inB := tune(func(c *gateway.Config) { c.StateDir = dirB })
	ga := gatewaytest.StartHost(t, hostA, url, tune(func(c *gateway.Config) { c.Core.PresenceTTL = time.Minute })) // still sees lead while B is down
	gb := gatewaytest.StartHost(t, hostB, url, inB)
	ctx := context.Background()
	if s := ga.DoctorReport(ctx).Broker.Server; s.Product != "RabbitMQ" || s.Overflow != broker.OverflowRejectPublish {
		t.Errorf("doctor's broker: %+v", s)
	}
	lead := gatewaytest.RegisterOn(t, gb, "lead", bridge.RolePrimary)
	w := gatewaytest.RegisterOn(t, ga, "w", bridge.RoleWorker)
	target := "lead@" + hostB
	gatewaytest.Eventually(t, 10*time.Second, hostA+" sees "+target, func() bool { _, err := ga.Core().Resolve(target); return err == nil })
	gb.Close() // nothing drains lead's inbox now

	for i := range capacity {
		if _, err := ga.Core().Send(ctx, w.GID, bridge.SendRequest{Target: target, Message: fmt.Sprint("fits ", i)}, nil); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	_, err := ga.Core().Send(ctx, w.GID, bridge.SendRequest{Target: target, Message: "one too many"}, nil)
	var ue *bridge.UserError
	if !errors.As(err, &ue) || !strings.Contains(ue.Msg, "inbox of "+target+" is full") {
		t.Fatalf("send into the full inbox: %v, want the user error that it is full", err)
	}
	queue := broker.InboxQueue(lead.GID, qtype)
	var dead []bridge.DeadLetterRecord
	gatewaytest.Eventually(t, 10*time.Second, "the refused message in the dead-letter log", func() bool {
		dl, err := ga.Core().DeadLetters(100000)
		if err != nil {
			t.Fatal(err)
		}
		dead = dead[:0]
		for _, r := range dl {
			if r.From == w.GID {
				dead = append(dead, r)
			}
		}
		return len(dead) > 0
	})
	if len(dead) != 1 || dead[0].Reason != bridge.ReasonMaxLen || dead[0].Queue != queue || dead[0].To != lead.GID {
		t.Errorf("dead letters of w: %+v, want the one refused (maxlen, %s)", dead, queue)
	}

	gb = gatewaytest.StartHost(t, hostB, url, inB)
	var got []string
	for deadline := time.Now().Add(10 * time.Second); len(got) < capacity && time.Now().Before(deadline); {
		r, err := gb.Core().Poll(ctx, lead.GID, bridge.PollRequest{Max: 100, Wait: time.Second}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range r.Messages {
			got = append(got, m.Body)
		}
	}
	if strings.Join(got, ",") != "fits 0,fits 1,fits 2" {
		t.Errorf("lead got %q, want every message that fitted, the oldest included", got)
	}
}
