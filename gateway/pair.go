package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/herdbridge/herdbridge/bridge/broker"
	"github.com/herdbridge/herdbridge/keys"
	"github.com/herdbridge/herdbridge/keys/pairing"
)

// PairConfig is what `herdbridge pair` needs: this host's state dir (its
// key and trust file) and the broker the gateways meet on.
type PairConfig struct {
	StateDir, Host                          string
	Broker, BrokerCA, BrokerCert, BrokerKey string
	Expires                                 time.Duration // of the initiator's code (pairing.DefaultExpires)
	MaxFailures                             int           // wrong attempts before the initiator gives up (pairing.DefaultMaxFailures)
	StepWait                                time.Duration // one step of an attempt (pairing.DefaultStepWait)
	Logger                                  *slog.Logger
}

// Pairing is a pairing process's connection to the broker, its own: it
// works whether or not this host's gateway runs, and a running gateway
// picks the pinned key up from its trust file (keys.Ring.Watch).
type Pairing struct {
	conn *broker.PairConn
	opts pairing.Options
}

// OpenPairing loads this host's key (creating it, as the gateway's first
// start would, if there is none) and connects to the broker.
func OpenPairing(ctx context.Context, cfg PairConfig) (*Pairing, error) {
	if cfg.Broker == "" {
		return nil, errors.New("pair: pairing runs over the broker: pass --broker amqp[s]://… (or set HERDBRIDGE_BROKER), the URL this host's gateway uses")
	}
	if err := broker.CheckURLs(broker.ParseURLs(cfg.Broker), nil); err != nil {
		return nil, fmt.Errorf("pair: --broker: %w", err)
	}
	if err := keys.CheckHost(cfg.Host); err != nil {
		return nil, fmt.Errorf("pair: %w: pass --host-id as this host's gateway does", err)
	}
	k, _, err := keys.LoadOrCreate(cfg.StateDir, cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("pair: host key: %w", err)
	}
	tlsConf, err := brokerTLS(cfg.BrokerCA, cfg.BrokerCert, cfg.BrokerKey)
	if err != nil {
		return nil, err
	}
	conn, err := broker.DialPair(ctx, broker.PairOptions{URL: cfg.Broker, TLS: tlsConf})
	if err != nil {
		return nil, err
	}
	opts := pairing.Options{Host: cfg.Host, Key: k.Public(), TrustFile: filepath.Join(cfg.StateDir, keys.TrustFile),
		Expires: cfg.Expires, MaxFailures: cfg.MaxFailures, StepWait: cfg.StepWait, Log: cfg.Logger}
	return &Pairing{conn: conn, opts: opts}, nil
}

// Offer draws a code and waits on the broker for the joiner (Offer.Wait).
func (p *Pairing) Offer(ctx context.Context) (*pairing.Offer, error) {
	return pairing.Listen(ctx, pairRendezvous{p.conn}, p.opts)
}

// Join pairs with the host that shows code.
func (p *Pairing) Join(ctx context.Context, code pairing.Code) (pairing.Result, error) {
	return pairing.Join(ctx, pairRendezvous{p.conn}, code, p.opts)
}

// TrustFile is where the peer's key is pinned.
func (p *Pairing) TrustFile() string { return p.opts.TrustFile }

// Close closes the broker connection.
func (p *Pairing) Close() error { return p.conn.Close() }

// pairRendezvous adapts broker.PairConn to pairing.Rendezvous (the broker
// package does not know the pairing package's types).
type pairRendezvous struct{ c *broker.PairConn }

func (r pairRendezvous) Open(ctx context.Context, addr string) (pairing.Room, error) {
	room, err := r.c.OpenRoom(ctx, addr)
	if errors.Is(err, broker.ErrPairTaken) {
		return nil, fmt.Errorf("%w: %v", pairing.ErrTaken, err)
	}
	if err != nil {
		return nil, err
	}
	return pairRoom{room}, nil
}

type pairRoom struct{ *broker.PairRoom }

func (r pairRoom) Send(ctx context.Context, to string, msg []byte, ttl time.Duration) error {
	err := r.PairRoom.Send(ctx, to, msg, ttl)
	if errors.Is(err, broker.ErrPairNoPeer) {
		return fmt.Errorf("%w: %v", pairing.ErrNoPeer, err)
	}
	return err
}
