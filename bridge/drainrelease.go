package bridge

import (
	"time"
)

// drainRelease gives back the memory a run of big drains leaves behind,
// as the spill loop does after a burst of writes: each result's bodies are
// read from the store (faulting the state file's pages into bbolt's map,
// where they stay counted in the gateway's RSS) and copied through
// decoding and encoding (garbage that keeps the heap at up to twice what
// is live until the runtime's scavenger slowly returns it). Past
// releaseAfterBytes of bodies drained, at most once per releaseDrainEvery,
// the poll that crossed it releases both before it returns.
type drainRelease struct {
	mu    leafMutex
	bytes int       // body bytes drained since the last release
	last  time.Time // when the last release was
}

// releaseDrainEvery spaces releases during a long drain: each one forces a
// garbage collection (a few milliseconds on a gateway's heap).
const releaseDrainEvery = time.Second

// drained counts n bytes of bodies handed to a reader, and releases when
// they add up.
func (c *Core) drained(n int) {
	d := &c.drains
	d.mu.Lock()
	d.bytes += n
	due := d.bytes >= releaseAfterBytes && time.Since(d.last) >= releaseDrainEvery
	if due {
		d.bytes, d.last = 0, time.Now()
	}
	d.mu.Unlock()
	if due {
		c.releaseMemory()
	}
}
