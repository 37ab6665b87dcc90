package pairing

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/herdbridge/herdbridge/keys"
)

// Errors a pairing ends with; each wraps into a sentence saying what to do.
var (
	ErrWrongCode    = errors.New("pairing: the code does not match")
	ErrReplay       = errors.New("pairing: replayed or out-of-turn pairing message")
	ErrExpired      = errors.New("pairing: the code expired")
	ErrTooManyTries = errors.New("pairing: too many wrong attempts")
)

// Defaults of Options.
const (
	DefaultExpires     = 5 * time.Minute
	DefaultMaxFailures = 3
	DefaultStepWait    = 20 * time.Second
)

// Options are one side's part of a pairing.
type Options struct {
	Host      string            // this host's id
	Key       ed25519.PublicKey // this host's public key, sent to the peer
	TrustFile string            // where the peer's key is pinned (keys.Trust)
	// Expires bounds how long the initiator's code is good (DefaultExpires).
	Expires time.Duration
	// MaxFailures is how many wrong attempts the initiator takes before it
	// gives up and the code is dead (DefaultMaxFailures).
	MaxFailures int
	// StepWait bounds how long either side waits for the peer's next
	// message once an attempt has begun (DefaultStepWait).
	StepWait time.Duration
	Log      *slog.Logger
}

func (o *Options) defaults() {
	if o.Expires <= 0 {
		o.Expires = DefaultExpires
	}
	if o.MaxFailures <= 0 {
		o.MaxFailures = DefaultMaxFailures
	}
	if o.StepWait <= 0 {
		o.StepWait = DefaultStepWait
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

func (o *Options) check() error {
	if err := keys.CheckHost(o.Host); err != nil {
		return err
	}
	if len(o.Key) != ed25519.PublicKeySize {
		return errors.New("pairing: no host key: run `herdbridge keys init`")
	}
	if o.TrustFile == "" {
		return errors.New("pairing: no trust file")
	}
	return nil
}

// Result is a pairing that succeeded: the peer now trusted here.
type Result struct {
	Peer     string
	PeerKey  ed25519.PublicKey
	Failures int // wrong attempts the initiator refused before this one
}

// Log keys.
const (
	logPeer     = "peer"
	logFailures = "failures"
	logMax      = "max"
	logErr      = "err"
	logFP       = "fingerprint"
)

func errSameHost(host string) error {
	return fmt.Errorf("pairing: the peer has this host's id %q: give each host its own --host-id", host)
}
