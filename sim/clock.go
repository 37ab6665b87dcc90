package sim

import (
	"sync/atomic"
	"time"
)

// clock is the wall clock plus an offset every gateway of a run shares:
// a reap round moves it past ReapAfter instead of waiting days, and all
// gateways stay on one time, so signed timestamps stay within the skew
// allowance.
type clock struct{ offset atomic.Int64 }

func (c *clock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

func (c *clock) advance(d time.Duration) { c.offset.Add(int64(d)) }
