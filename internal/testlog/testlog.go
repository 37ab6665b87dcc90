// Package testlog holds what tests need to read logs: a buffer safe to
// read while the code under test writes to it from other goroutines.
package testlog

import (
	"bytes"
	"sync"
)

// Buffer is a log sink a test reads while goroutines write to it. The zero
// value is ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
