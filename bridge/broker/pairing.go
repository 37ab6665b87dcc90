package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// ExchangePair is where two `herdbridge pair` processes meet: a direct
// exchange, each side's queue bound under its own name. Nothing on it is
// durable: a pairing lives only while both processes run.
const ExchangePair = "bridge.pair"

var (
	// ErrPairTaken: another connection holds the pairing queue asked for.
	ErrPairTaken = errors.New("broker: pairing queue held by another pairing")
	// ErrPairNoPeer: a pairing message was routed to no queue.
	ErrPairNoPeer = errors.New("broker: no pairing queue for that address")
)

// PairOptions configure DialPair.
type PairOptions struct {
	URL            string // one node, or a comma list of nodes
	TLS            *tls.Config
	ConnectTimeout time.Duration // default 10s
}

// PairConn is a pairing process's own broker connection, independent of
// any gateway (pairing works whether or not this host's gateway runs). It
// opens PairRooms.
type PairConn struct {
	conn *amqp.Connection
}

// DialPair connects to the broker for pairing: to the first of its nodes
// (URL, or a comma list of them) that answers, in the order given.
func DialPair(ctx context.Context, opts PairOptions) (*PairConn, error) {
	urls := ParseURLs(opts.URL)
	if err := CheckURLs(urls, opts.TLS); err != nil {
		return nil, err
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 10 * time.Second
	}
	var errs []error
	for _, u := range urls {
		c, err := dialPairNode(ctx, opts, u, len(urls))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

func dialPairNode(ctx context.Context, opts PairOptions, url string, nodes int) (*PairConn, error) {
	cfg := amqp.Config{Heartbeat: 10 * time.Second, TLSClientConfig: nodeTLS(opts.TLS, url, nodes), Locale: "en_US",
		Properties: amqp.Table{"connection_name": "herdbridge pair"}, Dial: amqp.DefaultDial(opts.ConnectTimeout)}
	conn, err := dial(ctx, url, cfg, opts.TLS)
	if err != nil {
		return nil, err
	}
	return &PairConn{conn: conn}, nil
}

// Close closes the connection; the broker deletes its pairing queues.
func (p *PairConn) Close() error { return p.conn.Close() }

// PairRoom is one pairing queue: exclusive to this connection,
// auto-deleted when it goes, bound to bridge.pair under its own name.
type PairRoom struct {
	ch         *amqp.Channel
	deliveries <-chan amqp.Delivery
	returns    chan amqp.Return
	closeOnce  sync.Once
}

// OpenRoom declares the pairing queue addr and consumes it. It returns an
// error wrapping ErrPairTaken when another connection holds addr.
func (p *PairConn) OpenRoom(ctx context.Context, addr string) (*PairRoom, error) {
	ch, err := p.conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("broker: open channel: %w", err)
	}
	room, err := openRoom(ch, addr)
	if err != nil {
		ch.Close()
		return nil, err
	}
	return room, nil
}

func openRoom(ch *amqp.Channel, addr string) (*PairRoom, error) {
	if err := ch.ExchangeDeclare(ExchangePair, amqp.ExchangeDirect, true, false, false, false, nil); err != nil {
		return nil, declareErr("exchange", ExchangePair, err)
	}
	if _, err := ch.QueueDeclare(addr, false, true, true, false, nil); err != nil {
		var ae *amqp.Error
		if errors.As(err, &ae) && ae.Code == amqp.ResourceLocked {
			return nil, fmt.Errorf("%w: %s", ErrPairTaken, addr)
		}
		return nil, declareErr("queue", addr, err)
	}
	if err := ch.QueueBind(addr, addr, ExchangePair, false, nil); err != nil {
		return nil, declareErr("binding of", addr, err)
	}
	if err := ch.Confirm(false); err != nil {
		return nil, fmt.Errorf("broker: publisher confirms: %w", err)
	}
	returns := ch.NotifyReturn(make(chan amqp.Return, 16))
	deliveries, err := ch.Consume(addr, "", true, true, false, false, nil)
	if err != nil {
		return nil, fmt.Errorf("broker: consume %s: %w", addr, err)
	}
	return &PairRoom{ch: ch, deliveries: deliveries, returns: returns}, nil
}

// Send publishes msg to the pairing queue to, mandatory and confirmed; it
// expires there after ttl. It returns an error wrapping ErrPairNoPeer when
// no queue has that name.
func (r *PairRoom) Send(ctx context.Context, to string, msg []byte, ttl time.Duration) error {
	for len(r.returns) > 0 { // stale returns of earlier sends
		<-r.returns
	}
	pub := amqp.Publishing{ContentType: "application/json", Body: msg, Timestamp: time.Now()}
	if ttl > 0 {
		pub.Expiration = strconv.FormatInt(max(ttl.Milliseconds(), 1), 10)
	}
	dc, err := r.ch.PublishWithDeferredConfirmWithContext(ctx, ExchangePair, to, true, false, pub)
	if err != nil {
		return fmt.Errorf("broker: publish pairing message: %w", err)
	}
	acked, err := dc.WaitContext(ctx)
	if err != nil {
		return fmt.Errorf("broker: publish pairing message: %w", err)
	}
	if !acked {
		return errors.New("broker: pairing message was not confirmed")
	}
	// The broker sends basic.return before basic.ack, and the client hands
	// the return over before it sees the ack: it is here by now.
	select {
	case <-r.returns:
		return fmt.Errorf("%w %s", ErrPairNoPeer, to)
	default:
		return nil
	}
}

// Next returns the body of the next message on the room's queue.
func (r *PairRoom) Next(ctx context.Context) ([]byte, error) {
	select {
	case d, ok := <-r.deliveries:
		if !ok {
			return nil, errors.New("broker: the pairing queue closed (connection to the broker lost?)")
		}
		return d.Body, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close cancels the consumer and closes the channel: the queue is deleted.
func (r *PairRoom) Close() error {
	var err error
	r.closeOnce.Do(func() { err = r.ch.Close() })
	return err
}
