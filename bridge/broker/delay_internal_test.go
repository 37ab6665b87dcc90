package broker

import (
	"errors"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/herdbridge/herdbridge/bridge"
)

// TestDelayOffReason: the probe's error says why bridge.delay is off — the
// exchange type missing (what RabbitMQ without the plugin answers, a
// connection-level 503; the exact reason below is RabbitMQ 3.10's, read
// off the broker that runs here), bridge.delay declared otherwise, no
// permission, or anything else as it is.
func TestDelayOffReason(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"RabbitMQ without the plugin", &amqp.Error{Code: amqp.CommandInvalid, Reason: "COMMAND_INVALID - unknown exchange type 'x-delayed-message'", Server: true}, reasonNoDelayType},
		{"a broker saying not implemented", &amqp.Error{Code: amqp.NotImplemented, Reason: "NOT_IMPLEMENTED - invalid exchange type", Server: true}, reasonNoDelayType},
		{"wrapped", errors.Join(errors.New("declare"), &amqp.Error{Code: amqp.CommandInvalid, Reason: "COMMAND_INVALID - unknown exchange type 'x-delayed-message'"}), reasonNoDelayType},
		{"declared otherwise", &amqp.Error{Code: amqp.PreconditionFailed, Reason: "PRECONDITION_FAILED - inequivalent arg 'type' for exchange 'bridge.delay'"}, "exists with other arguments"},
		{"no permission", &amqp.Error{Code: amqp.AccessRefused, Reason: "ACCESS_REFUSED - access to exchange 'bridge.delay' in vhost '/' refused for user 'u'"}, "may not declare or bind"},
		{"another command invalid", &amqp.Error{Code: amqp.CommandInvalid, Reason: "COMMAND_INVALID - something else"}, "refused the declare of bridge.delay: 503"},
		{"not an AMQP error", errors.New("EOF"), "the probe failed: EOF"},
	} {
		got := delayOffReason(tc.err)
		if tc.want == reasonNoDelayType && got != tc.want || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestDelayedPublishing: the delayed publish is the envelope as Publish
// sends it, plus x-delay in milliseconds; the envelope's own headers are
// not changed.
func TestDelayedPublishing(t *testing.T) {
	env := &bridge.Envelope{V: bridge.Version, Kind: bridge.KindFailed, MsgID: "m1", To: "g", Host: "h", Body: []byte("b")}
	p := delayedPublishing(env, 1500*time.Millisecond)
	if p.Headers[headerDelay] != int64(1500) || p.MessageId != "m1" || p.DeliveryMode != amqp.Persistent || string(p.Body) != "b" {
		t.Fatalf("delayed publishing %+v", p)
	}
	if _, ok := env.Headers()[headerDelay]; ok {
		t.Fatal("x-delay leaked into the envelope's headers")
	}
	if p := delayedPublishing(env, -time.Second); p.Headers[headerDelay] != int64(0) {
		t.Fatalf("a negative delay: x-delay %v", p.Headers[headerDelay])
	}
}
