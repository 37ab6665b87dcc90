package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/herdbridge/herdbridge/bridge"
)

// The optional delay exchange (SPEC §5, seed §3): bridge.delay, of type
// x-delayed-message with x-delayed-type topic, bound to bridge.msg with
// `#`, so a message published to it with an x-delay header (milliseconds)
// is routed into bridge.msg — to the inbox its key names — after the
// delay. LavinMQ has the type natively; RabbitMQ only with the
// rabbitmq_delayed_message_exchange plugin, which a stock install lacks.
// So it is detected after every connect and used only where it is there:
// off, nothing publishes to it and nothing else changes.
//
// The detection cannot run on the gateway's own connection: RabbitMQ
// answers an exchange.declare of a type it does not know with a
// connection-level error (503 COMMAND_INVALID "unknown exchange type"),
// which would close the connection every inbox consumes on. It dials a
// throwaway connection to the same node instead, declares bridge.delay and
// binds it there, reads the error and hangs up.
const (
	ExchangeDelay     = "bridge.delay"
	delayExchangeType = "x-delayed-message"
	headerDelay       = "x-delay"
)

// delayProbeWait bounds the probe: a broker that answers the gateway's
// connection but not the probe's must not hold up the connect.
const delayProbeWait = 5 * time.Second

// reasonNoDelayType is why bridge.delay is off on a broker without the
// exchange type: the usual case on RabbitMQ.
const reasonNoDelayType = "no x-delayed-message on this broker"

// delayCell is the transport's current delay state; nil before the first
// probe (off).
type delayCell = atomic.Pointer[bridge.DelayState]

// DelayState implements bridge.DelayTransport.
func (t *Transport) DelayState() bridge.DelayState {
	if s := t.delay.Load(); s != nil {
		return *s
	}
	return bridge.DelayState{Reason: "not probed yet"}
}

// probeDelayLater probes the node url names (dialled with cfg, as the
// gateway's connection was) for the delay exchange in the background —
// a connect, the first or a reconnect after a failover, never waits for
// it; until it answers bridge.delay is off — declaring and binding it
// where the type exists.
func (t *Transport) probeDelayLater(url string, cfg amqp.Config) {
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), delayProbeWait)
		defer cancel()
		go func() {
			select {
			case <-t.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		t.setDelay(probeDelay(ctx, url, cfg))
	}()
}

// setDelay records s and logs it when it changed: once at startup, and
// again only if a reconnect lands on a broker that differs.
func (t *Transport) setDelay(s bridge.DelayState) {
	if old := t.delay.Swap(&s); old != nil && *old == s {
		return
	}
	switch {
	case s.On:
		t.log.Info("bridge.delay on: the broker has x-delayed-message; notices a transport refused are also handed to it for a retry that outlives this gateway")
	case s.Reason == reasonNoDelayType:
		t.log.Info("bridge.delay off: " + s.Reason + " (optional; on RabbitMQ: rabbitmq-plugins enable rabbitmq_delayed_message_exchange)")
	default:
		t.log.Warn("bridge.delay off: " + s.Reason)
	}
}

// probeDelay dials a throwaway connection and declares the delay topology
// on it; its error says whether the broker has the type.
func probeDelay(ctx context.Context, url string, cfg amqp.Config) bridge.DelayState {
	cfg.Properties = amqp.Table{"connection_name": "herdbridge delay probe"}
	cfg.TLSClientConfig = cfg.TLSClientConfig.Clone() // the gateway's connection has its own
	type res struct {
		c   *amqp.Connection
		err error
	}
	dialed := make(chan res, 1)
	go func() { c, err := amqp.DialConfig(url, cfg); dialed <- res{c, err} }()
	var conn *amqp.Connection
	select {
	case r := <-dialed:
		if r.err != nil {
			return bridge.DelayState{Reason: "the probe could not connect: " + r.err.Error()}
		}
		conn = r.c
	case <-ctx.Done():
		go func() {
			if r := <-dialed; r.c != nil {
				r.c.Close()
			}
		}()
		return bridge.DelayState{Reason: "the probe timed out connecting"}
	}
	defer conn.Close()
	done := make(chan error, 1)
	go func() { done <- declareDelay(conn) }()
	select {
	case err := <-done:
		if err != nil {
			return bridge.DelayState{Reason: delayOffReason(err)}
		}
		return bridge.DelayState{On: true}
	case <-ctx.Done():
		conn.Close() // unblocks declareDelay
		return bridge.DelayState{Reason: "the probe timed out: the broker did not answer the declare of " + ExchangeDelay}
	}
}

// declareDelay declares bridge.delay and binds bridge.msg to it (an
// exchange-to-exchange binding: whatever comes due is routed as if it had
// been published to bridge.msg with its key). Both are idempotent.
func declareDelay(conn *amqp.Connection) error {
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	args := amqp.Table{"x-delayed-type": amqp.ExchangeTopic}
	if err := ch.ExchangeDeclare(ExchangeDelay, delayExchangeType, true, false, false, false, args); err != nil {
		return err
	}
	return ch.ExchangeBind(ExchangeMsg, "#", ExchangeDelay, false, nil)
}

// delayOffReason classifies the probe's error: the type missing (the
// normal off), bridge.delay declared otherwise by someone, no permission,
// or anything else, said as it is.
func delayOffReason(err error) string {
	var ae *amqp.Error
	if !errors.As(err, &ae) {
		return "the probe failed: " + err.Error()
	}
	reason := strings.ToLower(ae.Reason)
	switch {
	case (ae.Code == amqp.CommandInvalid || ae.Code == amqp.NotImplemented) && strings.Contains(reason, "exchange type"),
		ae.Code == amqp.CommandInvalid && strings.Contains(reason, delayExchangeType):
		return reasonNoDelayType
	case ae.Code == amqp.PreconditionFailed:
		return ExchangeDelay + " exists with other arguments (not " + delayExchangeType + " with x-delayed-type topic): delete it on the broker to let gateways declare it (" + propText(ae.Reason) + ")"
	case ae.Code == amqp.AccessRefused:
		return "this user may not declare or bind " + ExchangeDelay + " (" + propText(ae.Reason) + ")"
	}
	return fmt.Sprintf("the broker refused the declare of %s: %d %s", ExchangeDelay, ae.Code, propText(ae.Reason))
}

// PublishDelayed implements bridge.DelayTransport: env goes to
// bridge.delay with an x-delay header, confirmed, not mandatory (the
// exchange routes it only when it comes due, so a mandatory publish would
// come back unroutable at once). Published once: a lost confirm is an
// error, not a retry — the caller keeps its own retry beside the copy.
func (t *Transport) PublishDelayed(ctx context.Context, key string, env *bridge.Envelope, after time.Duration) error {
	if !t.DelayState().On {
		return bridge.ErrDelayOff
	}
	if !t.Connected() { // a copy is not worth waiting for a reconnect
		return fmt.Errorf("%w: not connected", bridge.ErrUnavailable)
	}
	_, pub, err := t.waitUpToPublish(ctx)
	if err != nil {
		return err
	}
	dc, err := pub.PublishWithDeferredConfirmWithContext(ctx, ExchangeDelay, key, false, false, delayedPublishing(env, after))
	if err != nil {
		return fmt.Errorf("broker: delayed publish %s: %w", env.MsgID, err)
	}
	t.counts.published()
	acked, err := dc.WaitContext(ctx)
	t.counts.settled()
	if err != nil {
		return fmt.Errorf("broker: delayed publish %s: %w", env.MsgID, err)
	}
	if !acked {
		return fmt.Errorf("broker: delayed publish %s: the broker did not take it", env.MsgID)
	}
	t.counts.confirmed(true)
	return nil
}

// delayedPublishing is env as Publish sends it, plus the delay.
func delayedPublishing(env *bridge.Envelope, after time.Duration) amqp.Publishing {
	h := amqp.Table(env.Headers())
	h[headerDelay] = max(after.Milliseconds(), 0)
	return amqp.Publishing{Headers: h, DeliveryMode: amqp.Persistent, MessageId: env.MsgID, Timestamp: env.TS,
		ContentType: "text/plain; charset=utf-8", Body: env.Body}
}
