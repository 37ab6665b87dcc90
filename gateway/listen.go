package gateway

// Listeners that keep serving: an accept error other than the listener
// being closed (EMFILE, ENFILE, ECONNABORTED, ENOBUFS, anything) is
// retried with backoff and logged once per burst, so a file-handle
// shortage pauses a listener instead of ending it; and a cap on the
// connections a listener holds at once, past which Accept waits (new
// connections queue in the kernel's backlog) until one closes.
//
// A small wrapper rather than golang.org/x/net/netutil.LimitListener: the
// retry loop and the per-uid count of the admin socket need the same hook,
// and the cap is a dozen lines.

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"
)

// NetConfig bounds what network clients may hold open and for how long.
// Zero fields take their defaults; a negative cap means none.
type NetConfig struct {
	// MaxConns caps the HTTP listener's open connections (default 512).
	MaxConns int `json:"maxConns,omitempty"`
	// IdleTimeout closes a keep-alive HTTP connection idle this long
	// between requests (default 60s). Open SSE and streamable-HTTP
	// streams are not idle: no read or write timeout cuts them.
	IdleTimeout Duration `json:"idleTimeout,omitempty"`
	// ReadHeaderTimeout bounds reading a request's headers (default 10s),
	// which is also how long a new connection may stay silent.
	ReadHeaderTimeout Duration `json:"readHeaderTimeout,omitempty"`
	// SocketMaxConns caps the admin socket's open connections (default
	// 1024); each stdio agent holds one.
	SocketMaxConns int `json:"socketMaxConns,omitempty"`
	// SocketMaxConnsPerUID caps one uid's open connections to the admin
	// socket (default 256), so no one user's flood takes all of
	// SocketMaxConns; a connection past it is closed at once.
	SocketMaxConnsPerUID int `json:"socketMaxConnsPerUid,omitempty"`
}

// Net defaults.
const (
	DefaultMaxConns             = 512
	DefaultIdleTimeout          = 60 * time.Second
	DefaultReadHeaderTimeout    = 10 * time.Second
	DefaultSocketMaxConns       = 1024
	DefaultSocketMaxConnsPerUID = 256
)

// withDefaults fills the zero fields.
func (n NetConfig) withDefaults() NetConfig {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&n.MaxConns, DefaultMaxConns)
	def(&n.SocketMaxConns, DefaultSocketMaxConns)
	def(&n.SocketMaxConnsPerUID, DefaultSocketMaxConnsPerUID)
	if n.IdleTimeout <= 0 {
		n.IdleTimeout = Duration(DefaultIdleTimeout)
	}
	if n.ReadHeaderTimeout <= 0 {
		n.ReadHeaderTimeout = Duration(DefaultReadHeaderTimeout)
	}
	return n
}

// Backoff bounds of a failing Accept.
const (
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
)

// steadyListener is a net.Listener whose Accept returns an error only
// once the listener is closed, and which holds at most max connections
// open at once (max <= 0: no cap).
type steadyListener struct {
	net.Listener
	log  *slog.Logger
	name string        // for the log: "http" or "socket"
	sem  chan struct{} // one token per open connection; nil: no cap
	done chan struct{} // closed by Close
	once sync.Once
}

func newSteadyListener(ln net.Listener, name string, max int, log *slog.Logger) *steadyListener {
	l := &steadyListener{Listener: ln, log: log, name: name, done: make(chan struct{})}
	if max > 0 {
		l.sem = make(chan struct{}, max)
	}
	return l
}

// Accept waits for a free slot, then for a connection, retrying failures
// with backoff until one comes or the listener is closed.
func (l *steadyListener) Accept() (net.Conn, error) {
	if l.sem != nil {
		select {
		case l.sem <- struct{}{}:
		case <-l.done:
			return nil, net.ErrClosed
		}
	}
	var (
		delay    time.Duration
		failures int
		first    error
	)
	for {
		c, err := l.Listener.Accept()
		if err == nil {
			if failures > 0 {
				l.log.Warn("accepting connections again", "listener", l.name, "failedAccepts", failures, "firstErr", first)
			}
			if l.sem == nil {
				return c, nil
			}
			return &slotConn{Conn: c, release: l.release}, nil
		}
		if errors.Is(err, net.ErrClosed) || l.isClosed() {
			l.release()
			return nil, err
		}
		if failures == 0 {
			first = err
			l.log.Error("accepting connections fails; retrying with backoff (out of file handles? see ulimit -n)", "listener", l.name, "err", err)
		}
		failures++
		delay = min(max(2*delay, acceptBackoffMin), acceptBackoffMax)
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-l.done:
			t.Stop()
			l.release()
			return nil, net.ErrClosed
		}
	}
}

func (l *steadyListener) release() {
	if l.sem != nil {
		<-l.sem
	}
}

func (l *steadyListener) isClosed() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// Close closes the listener; a waiting Accept returns net.ErrClosed.
func (l *steadyListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// slotConn gives its listener slot back when closed (once).
type slotConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// NetConn is the wrapped connection (peer credentials read it).
func (c *slotConn) NetConn() net.Conn { return c.Conn }

// unwrapConn is the innermost connection under wrappers like slotConn.
func unwrapConn(c net.Conn) net.Conn {
	for {
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return c
		}
		c = w.NetConn()
	}
}

// uidCounter counts open admin-socket connections per peer uid.
type uidCounter struct {
	max int // <= 0: no cap
	mu  sync.Mutex
	n   map[uint32]int
	// refused counts refusals since the last log line, which is written
	// at the first refusal and then at most once a minute.
	refused int
	logged  time.Time
}

// take counts one more connection of uid, or reports false (and counts
// nothing) when uid is at the cap. logNow says whether to log the refusal,
// and how many the line stands for.
func (u *uidCounter) take(uid uint32) (ok bool, logNow int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.max <= 0 || u.n[uid] < u.max {
		if u.n == nil {
			u.n = map[uint32]int{}
		}
		u.n[uid]++
		return true, 0
	}
	u.refused++
	if now := time.Now(); now.Sub(u.logged) >= time.Minute {
		u.logged = now
		n := u.refused
		u.refused = 0
		return false, n
	}
	return false, 0
}

func (u *uidCounter) put(uid uint32) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.n[uid]--; u.n[uid] <= 0 {
		delete(u.n, uid)
	}
}
