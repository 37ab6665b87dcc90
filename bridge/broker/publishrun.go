package broker

import (
	"context"
	"errors"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/herdbridge/herdbridge/bridge"
)

var _ bridge.RunPublisher = (*Transport)(nil)

// PublishRun implements bridge.RunPublisher: the run is written in order
// on the publish channel (one channel: the broker takes them in that
// order), then each deferred confirm is waited and judged as Publish
// judges it. The first message that is not settled — its write failed,
// its confirm was lost with the channel or the connection, or a quorum
// inbox between leaders nacked it — ends the judging: it and the rest are
// reported unknown (bridge.ErrUnavailable) for the caller to publish again
// from it on. The confirms of the rest are not waited: publishing them
// again is what follows either way, and a nack's passive declare and
// pause (nackedWhileNotFull) are paid once per run, not per message.
func (t *Transport) PublishRun(ctx context.Context, run []bridge.Outgoing) []error {
	errs := make([]error, len(run))
	conn, pub, err := t.waitUpToPublish(ctx)
	if err != nil {
		unknownFrom(errs, 0, err)
		return errs
	}
	dcs := t.writeRun(ctx, conn, pub, run, errs)
	defer func() { // all of the run is out of the confirm window once it returns
		for range dcs {
			t.counts.settled()
		}
	}()
	for i, dc := range dcs {
		o := run[i]
		lost := func() error { return fmt.Errorf("%w: the broker closed the publish channel", bridge.ErrUnavailable) }
		again, err := t.awaitConfirm(ctx, conn, pub, dc, o.Key, o.Env, o.Mandatory, lost)
		if again || !settled(err) {
			unknownFrom(errs, i, err)
			return errs
		}
		errs[i] = err
	}
	return errs
}

// settled reports whether err is a publish's outcome the broker decided:
// confirmed, returned unroutable, refused by a full inbox.
func settled(err error) bool {
	return err == nil || errors.Is(err, bridge.ErrUnroutable) || errors.Is(err, bridge.ErrInboxFull)
}

// writeRun writes run's messages in order and returns the deferred
// confirms of those written; past a failed write the rest are unknown.
func (t *Transport) writeRun(ctx context.Context, conn *amqp.Connection, pub *amqp.Channel, run []bridge.Outgoing, errs []error) []*amqp.DeferredConfirmation {
	dcs := make([]*amqp.DeferredConfirmation, 0, len(run))
	for i, o := range run {
		dc, err := pub.PublishWithDeferredConfirmWithContext(ctx, ExchangeMsg, o.Key, o.Mandatory, false, inboxPublishing(o.Env))
		if err != nil {
			err = t.publishFailed(conn, o.Env, err, func() error { return nil })
			unknownFrom(errs, i, err)
			return dcs
		}
		t.counts.published() // in the confirm window, as a lone publish is (counts.go)
		dcs = append(dcs, dc)
	}
	return dcs
}

// unknownFrom marks errs[i:] as not known to be published, why (may be
// nil) saying why for the first.
func unknownFrom(errs []error, i int, why error) {
	for j := i; j < len(errs); j++ {
		if j == i && why != nil {
			errs[j] = fmt.Errorf("%w: not confirmed: %w", bridge.ErrUnavailable, why)
			continue
		}
		errs[j] = fmt.Errorf("%w: not confirmed (an earlier message of its run was not)", bridge.ErrUnavailable)
	}
}
