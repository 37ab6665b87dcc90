package pairing

import (
	"context"
	"encoding/hex"
	"errors"
	"time"
)

// Rendezvous opens Rooms on the broker. Its implementation (bridge/broker,
// joined in package gateway) declares a temporary queue per side, exclusive
// to the pairing process and deleted when it ends.
type Rendezvous interface {
	// Open declares this side's own address and returns a Room receiving
	// what is sent to it. It returns an error wrapping ErrTaken when
	// another process holds addr.
	Open(ctx context.Context, addr string) (Room, error)
}

// Room is one side's place on the broker. One goroutine uses it.
type Room interface {
	// Send delivers msg to the address to, where it lives at most ttl. It
	// returns an error wrapping ErrNoPeer when nothing listens there.
	Send(ctx context.Context, to string, msg []byte, ttl time.Duration) error
	// Next returns the next message sent to this room, waiting until ctx
	// ends.
	Next(ctx context.Context) ([]byte, error)
	// Close leaves the room; its queue is deleted.
	Close() error
}

var (
	// ErrTaken: another pairing holds this address (a nameplate in use).
	ErrTaken = errors.New("pairing: address taken")
	// ErrNoPeer: nothing listens at the address a message was sent to.
	ErrNoPeer = errors.New("pairing: nobody waits there")
)

// InitiatorAddr is the address the initiator of a code listens on.
func InitiatorAddr(c Code) string { return "pair." + c.Nameplate() }

// joinerAddr is the address a joiner listens on for session sid.
func joinerAddr(c Code, sid []byte) string {
	return "pair." + c.Nameplate() + "." + hex.EncodeToString(sid)
}
