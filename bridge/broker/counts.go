package broker

import "sync/atomic"

// Counts are the transport's running totals since Open: what the
// gateway's metrics report about the broker link. Plain numbers, so the
// transport needs no metrics library.
type Counts struct {
	Publishes  uint64 // basic.publish frames sent; one retried after a lost link counts again
	Confirms   uint64 // publishes the broker confirmed (ack)
	Nacks      uint64 // publishes the broker refused (nack: an inbox at its cap)
	Returns    uint64 // mandatory publishes the broker returned unroutable
	Reconnects uint64 // connections re-established after a loss
	// Rotations is how many times the publish channel was replaced because a
	// quorum inbox below its cap kept nacking it (pubrotate.go).
	Rotations uint64
	// Unconfirmed is how many publishes await their confirm right now: the
	// confirm window that concurrent sends share. PeakUnconfirmed is the
	// most there ever were at once — above 1 only when publishes overlap.
	Unconfirmed     uint64
	PeakUnconfirmed uint64
	// Deliveries the broker pushed to this gateway's consumers, by the
	// queue they came from: summed over every gateway, the presence and
	// control ones are the broker's presence traffic (make scale reads
	// them; the broker without its management plugin counts nothing).
	PresenceDeliveries   uint64
	ControlDeliveries    uint64
	InboxDeliveries      uint64
	DeadLetterDeliveries uint64
}

// deliveryKind is which kind of queue a consumer reads, for Counts.
type deliveryKind int

const (
	inboxDeliveries deliveryKind = iota // the zero value: Consume's consumers
	presenceDeliveries
	controlDeliveries
	deadLetterDeliveries
	deliveryKinds
)

// counters are Counts as they run.
type counters struct {
	publishes, confirms, nacks, returns, reconnects, rotations atomic.Uint64
	unconfirmed                                                atomic.Int64
	peak                                                       atomic.Uint64
	deliveries                                                 [deliveryKinds]atomic.Uint64
}

// Counts reads the totals now.
func (t *Transport) Counts() Counts {
	c := &t.counts
	return Counts{Publishes: c.publishes.Load(), Confirms: c.confirms.Load(), Nacks: c.nacks.Load(),
		Returns: c.returns.Load(), Reconnects: c.reconnects.Load(), Rotations: c.rotations.Load(),
		Unconfirmed: uint64(max(c.unconfirmed.Load(), 0)), PeakUnconfirmed: c.peak.Load(),
		PresenceDeliveries: c.deliveries[presenceDeliveries].Load(), ControlDeliveries: c.deliveries[controlDeliveries].Load(),
		InboxDeliveries: c.deliveries[inboxDeliveries].Load(), DeadLetterDeliveries: c.deliveries[deadLetterDeliveries].Load()}
}

// delivered counts one delivery of a consumer of kind k.
func (c *counters) delivered(k deliveryKind) { c.deliveries[k].Add(1) }

// published counts a publish sent: it joins the confirm window until
// settled (confirmed, nacked or lost with its channel).
func (c *counters) published() {
	c.publishes.Add(1)
	n := uint64(c.unconfirmed.Add(1))
	for p := c.peak.Load(); n > p && !c.peak.CompareAndSwap(p, n); p = c.peak.Load() {
	}
}

// settled takes a publish out of the confirm window.
func (c *counters) settled() { c.unconfirmed.Add(-1) }

// confirmed counts one confirm: acked, or nacked by the broker.
func (c *counters) confirmed(acked bool) {
	if acked {
		c.confirms.Add(1)
	} else {
		c.nacks.Add(1)
	}
}
