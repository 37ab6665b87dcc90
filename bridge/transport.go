package bridge

import (
	"context"
	"errors"
	"time"
)

// Transport moves envelopes between per-entity inboxes (SPEC §5, §6). The
// bridge core owns this interface; the embedded store and the AMQP broker
// implement it, and both pass the suite in bridge/transporttest.
//
// Routing keys are an entity gid (point to point) or broadcast.all /
// broadcast.<group>. An inbox is bound to its gid, broadcast.all and one
// broadcast key per group.
type Transport interface {
	// DeclareInbox creates the durable inbox of gid, or re-binds an existing
	// one to exactly spec.Groups. Idempotent.
	DeclareInbox(ctx context.Context, gid string, spec InboxSpec) error
	// DeleteInbox removes the inbox, its bindings and whatever it held.
	DeleteInbox(ctx context.Context, gid string) error
	// CloseInbox unbinds the inbox from every routing key, so nothing more
	// is routed into it (a mandatory publish to gid is ErrUnroutable from
	// now on), and reports how many messages still wait in it or are on
	// their way into it: stored and not settled (delivered-unacked ones
	// included), plus publishes routed to it before it closed that have
	// not finished. What it holds is still delivered to its consumer. A
	// removal closes an inbox, lets its consumer settle what is left, and
	// deletes it only once this reports 0 with no consumer attached, so no
	// message is deleted with an inbox without a fate (removal.go).
	// Calling it again only counts. An inbox that does not exist is 0.
	CloseInbox(ctx context.Context, gid string) (waiting int, err error)
	// Publish routes env by key and returns once it is durable in every
	// inbox it was routed to. With mandatory set, a key bound to no inbox
	// is ErrUnroutable. A point-to-point publish into an inbox at its cap is
	// ErrInboxFull (the message is dead-lettered with reason "maxlen").
	Publish(ctx context.Context, key string, env *Envelope, mandatory bool) error
	// Consume attaches the one consumer of gid's inbox. At most prefetch
	// deliveries are outstanding (neither acked nor rejected); the rest stay
	// in the inbox where caps and TTL act. h is called from one goroutine per
	// inbox and must not block. Deliveries left unacked when the
	// subscription ends are delivered again to the next consumer.
	Consume(ctx context.Context, gid string, prefetch int, h func(Delivery)) (Subscription, error)
	// ConsumeDeadLetters delivers every dead-lettered message once until it
	// is acked.
	ConsumeDeadLetters(ctx context.Context, h func(DeadLetter)) (Subscription, error)
	// Close releases the transport. Idempotent.
	Close() error
}

// InboxSpec is how an inbox is declared: its bindings and its limits.
type InboxSpec struct {
	Groups     []string
	MaxLength  int           // ready messages (delivered-unacked ones do not count, as on the broker); publishes over it are refused and dead-lettered
	MessageTTL time.Duration // backstop: older unconsumed messages are dead-lettered
	Expires    time.Duration // an inbox unused this long may be collected (0: never)
}

// Acker settles one delivery.
type Acker interface {
	// Ack removes the message from the inbox: the entity has it.
	Ack() error
	// Reject dead-letters the message (never requeues it) with reason.
	Reject(reason string) error
}

// Delivery is one message handed to a consumer. A message whose headers do
// not decode is delivered too, with Env nil and Err set: the consumer
// dead-letters it (and counts why) — a transport never drops one quietly.
type Delivery struct {
	Env         *Envelope
	Key         string // the routing key it was published with
	Redelivered bool   // set by the transport (never by a publisher): handed out before
	Err         error  // why Env is nil (wraps ErrMalformed)
	ID          string // the transport's message id, for logs when Env is nil
	Acker       Acker
}

// DeadLetter is one message that reached the dead-letter queue. Env is nil
// when the message could not be decoded; MsgID and From are then best effort.
type DeadLetter struct {
	Env    *Envelope
	MsgID  string
	Reason string // maxlen | expired | rejected | rejected: <why>
	Queue  string // inbox it left, e.g. agent.<gid>.inbox.v2
	At     time.Time
	Acker  Acker
}

// Subscription is a running consumer.
type Subscription interface {
	// Cancel stops deliveries and waits until the handler is no longer
	// called. Idempotent.
	Cancel()
}

// Dead-letter reasons shared by every transport.
const (
	ReasonMaxLen   = "maxlen"
	ReasonExpired  = "expired"
	ReasonRejected = "rejected"
)

// Transport errors.
var (
	ErrUnroutable     = errors.New("bridge: no inbox bound to that key")
	ErrInboxFull      = errors.New("bridge: inbox full")
	ErrConsumerExists = errors.New("bridge: inbox already has a consumer")
	ErrNoInbox        = errors.New("bridge: no such inbox")
	ErrClosed         = errors.New("bridge: transport closed")
	// ErrUnavailable is a transport that cannot reach its broker within its
	// bound: the message was not published (or, when the link dropped
	// before the broker confirmed it, its fate is unknown: the error says).
	ErrUnavailable = errors.New("bridge: transport unavailable")
	// ErrSpooled is a publish the transport could not make now (its broker
	// is unreachable) and accepted anyway: the message is durable at this
	// gateway and is published, in order, when the broker returns. It is a
	// success for the caller, who reports the message queued.
	ErrSpooled = errors.New("bridge: the broker is unreachable: accepted and kept at this gateway; it is published when the broker returns")
)

// InboxQueueName is the broker name of gid's inbox (SPEC §5).
func InboxQueueName(gid string) string { return "agent." + gid + ".inbox.v2" }

// PresenceTransport carries presence heartbeats between gateways (SPEC §7):
// bridge.roster on a broker. A transport without other hosts (the embedded
// one) does not implement it.
type PresenceTransport interface {
	// PublishPresence publishes one heartbeat of host, for everyone.
	PublishPresence(ctx context.Context, env *Envelope) error
	// ConsumePresence attaches this host's roster queue (exclusive: a second
	// gateway with the same host id is refused) and delivers every
	// heartbeat, this host's own included. A rejected one is dead-lettered.
	ConsumePresence(ctx context.Context, host string, h func(Delivery)) (Subscription, error)
}

// ControlTransport carries control messages to one host (SPEC §7: SPAWN on
// bridge.control to control.<host>). Deliveries are manual-ack: a SPAWN is
// acked once handled, so a gateway that dies mid-spawn gets it again (and
// deduplicates on spawnId).
type ControlTransport interface {
	PublishControl(ctx context.Context, host string, env *Envelope) error
	ConsumeControl(ctx context.Context, host string, h func(Delivery)) (Subscription, error)
}

// Outgoing is one message of a run published in order (a RunPublisher's).
type Outgoing struct {
	Key       string
	Env       *Envelope
	Mandatory bool
}

// RunPublisher is a transport that can publish a run of messages in order
// with their confirms pipelined: every message written, then every confirm
// waited, so a run costs about one confirm round trip, not one per message.
// PublishRun returns one result per message, as Publish would: nil,
// ErrUnroutable or ErrInboxFull for a message the broker settled, and from
// the first one it did not settle on (not written, its confirm lost,
// nacked while the broker was between leaders, refused for another
// reason: the cause is wrapped in the first's error) an error wrapping
// ErrUnavailable: the caller publishes again from that message on, in
// order, and judges a refusal by publishing that message alone.
type RunPublisher interface {
	PublishRun(ctx context.Context, run []Outgoing) []error
}
