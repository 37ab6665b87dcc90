package pairing

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// memRendezvous is an in-process Rendezvous with the broker's semantics
// that matter here: an address is held by one room, a send to an address
// nobody holds fails with ErrNoPeer, and taps see copies of everything
// sent (an onlooker on the broker).
type memRendezvous struct {
	mu    sync.Mutex
	rooms map[string]*memRoom
	taps  []chan tapped
}

type tapped struct {
	to  string
	msg []byte
}

func newMem() *memRendezvous { return &memRendezvous{rooms: map[string]*memRoom{}} }

func (r *memRendezvous) Open(_ context.Context, addr string) (Room, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rooms[addr] != nil {
		return nil, fmt.Errorf("mem: %s: %w", addr, ErrTaken)
	}
	m := &memRoom{r: r, addr: addr, in: make(chan []byte, 64), closed: make(chan struct{})}
	r.rooms[addr] = m
	return m, nil
}

// tap returns a channel receiving a copy of every message sent from now.
func (r *memRendezvous) tap() <-chan tapped {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := make(chan tapped, 64)
	r.taps = append(r.taps, c)
	return c
}

type memRoom struct {
	r      *memRendezvous
	addr   string
	in     chan []byte
	closed chan struct{}
	once   sync.Once
}

func (m *memRoom) Send(_ context.Context, to string, msg []byte, _ time.Duration) error {
	m.r.mu.Lock()
	defer m.r.mu.Unlock()
	for _, t := range m.r.taps {
		t <- tapped{to, append([]byte(nil), msg...)}
	}
	dst := m.r.rooms[to]
	if dst == nil {
		return fmt.Errorf("mem: %s: %w", to, ErrNoPeer)
	}
	dst.in <- append([]byte(nil), msg...)
	return nil
}

func (m *memRoom) Next(ctx context.Context) ([]byte, error) {
	select {
	case b := <-m.in:
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-m.closed:
		return nil, errors.New("mem: room closed")
	}
}

func (m *memRoom) Close() error {
	m.r.mu.Lock()
	defer m.r.mu.Unlock()
	if m.r.rooms[m.addr] == m {
		delete(m.r.rooms, m.addr)
	}
	m.once.Do(func() { close(m.closed) })
	return nil
}
