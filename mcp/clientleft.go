package mcp

import (
	"context"
	"net"
	"net/http"
)

// Over streamable HTTP a client cancels a call by closing the request's
// connection (mcp-go does so on protocol 2026-07-28, and any HTTP client
// whose timeout fires does the same), and its next request comes on a new
// connection. A gateway that stalled (SIGSTOP, a long GC pause, a swapped
// out host) after the call handed messages over wakes to a closed
// connection: the write of the result still succeeds — into the socket,
// not to the client — and the next request would count as evidence the
// client read it. So a result whose client had closed the connection
// before the response was complete is not leased: its messages go back to
// held, flagged redelivered (how much of it reached the client is not
// known). The check is the request's context (net/http cancels it when
// it reads the peer's EOF) and, for the reads it has not made yet, the
// socket's own state (clientClosed, per platform).

type connKey struct{}

// ConnContext is an http.Server ConnContext: it gives each request the
// connection it came on, for the check above.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// clientLeft reports whether r's client had closed (or reset) the
// connection by now, while the handler still runs.
func clientLeft(r *http.Request) bool {
	if r.Context().Err() != nil {
		return true
	}
	c, _ := r.Context().Value(connKey{}).(net.Conn)
	return c != nil && clientClosed(rawConn(c))
}

// rawConn is the socket under c's wrappers (TLS, the listener's slot).
func rawConn(c net.Conn) net.Conn {
	for {
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return c
		}
		c = w.NetConn()
	}
}
