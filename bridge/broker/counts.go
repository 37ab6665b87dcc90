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
}

// counters are Counts as they run.
type counters struct {
	publishes, confirms, nacks, returns, reconnects atomic.Uint64
}

// Counts reads the totals now.
func (t *Transport) Counts() Counts {
	c := &t.counts
	return Counts{Publishes: c.publishes.Load(), Confirms: c.confirms.Load(), Nacks: c.nacks.Load(),
		Returns: c.returns.Load(), Reconnects: c.reconnects.Load()}
}

// confirmed counts one confirm: acked, or nacked by the broker.
func (c *counters) confirmed(acked bool) {
	if acked {
		c.confirms.Add(1)
	} else {
		c.nacks.Add(1)
	}
}
