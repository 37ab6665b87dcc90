package broker

import (
	"context"
	"crypto/tls"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"
)

// dial connects to url with cfg, bounded by ctx: amqp091-go's dial takes
// no context, so it runs aside, and a connection that arrives after ctx
// ended is closed. The error names the node (credentials redacted) and,
// for a refused dial, says what to check (connectHint, with tlsConf).
func dial(ctx context.Context, url string, cfg amqp.Config, tlsConf *tls.Config) (*amqp.Connection, error) {
	type res struct {
		c   *amqp.Connection
		err error
	}
	ch := make(chan res, 1)
	go func() { c, err := amqp.DialConfig(url, cfg); ch <- res{c, err} }()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("broker: connect to %s: %w%s", redact(url), r.err, connectHint(r.err, tlsConf))
		}
		return r.c, nil
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.c != nil {
				r.c.Close()
			}
		}()
		return nil, fmt.Errorf("broker: connect to %s: %w", redact(url), ctx.Err())
	}
}
