package mcp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// DefaultWriteTimeout bounds one write of an HTTP response to a client
// that does not read it (HTTPOptions.WriteTimeout).
const DefaultWriteTimeout = 30 * time.Second

// streamableHandover applies the ack rule of streamable HTTP (leaseBook)
// to /mcp: a POST or DELETE is first evidence for what its session was
// given before; a POST's call then runs with a Handover, and what it hands
// over is leased once its response was written in full (a write that
// stalls past writeTimeout fails instead). A response never written (the
// client went away first) returns the messages unseen, one that failed
// part way returns them flagged redelivered.
func (s *Server) streamableHandover(next http.Handler, writeTimeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gid, _ := EntityFrom(r.Context())
		key := leaseKey(r.Header.Get("Mcp-Session-Id"), gid)
		switch r.Method {
		case http.MethodDelete: // a clean end: the client has read what it was given
			s.leases.arrived(key, nil)
			next.ServeHTTP(w, r)
			return
		case http.MethodPost:
		default:
			next.ServeHTTP(w, r)
			return
		}
		raw, ok := bufferBody(r)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		s.leases.arrived(key, raw)
		h := &bridge.Handover{}
		// a client that closed the connection before the first byte of
		// the result gave up on the call: nothing is written
		ew := &errWriter{rw: w, timeout: writeTimeout, left: func() bool { return clientLeft(r) }}
		// in the book before the call runs: the client may have read all
		// of the result, and sent its next request, before we return
		l := s.leases.open(key, requestID(raw), h, ew.started)
		wrote, failed := false, false
		// written into the socket, the client may still never read it: it
		// is acked on evidence (the session's next request) only; deferred,
		// so a handler that panics leaves no open entry behind
		defer func() { s.leases.close(key, l, wrote, failed) }()
		next.ServeHTTP(ew, r.WithContext(bridge.WithHandover(r.Context(), h)))
		wrote, failed = ew.finish()
	})
}

// sseHandover applies the same rule to SSE's POST /message: the answer goes
// out on the session's event stream after the handler returned 202, so
// the call leases what it handed over when it returns (leaseOnReturn).
func (s *Server) sseHandover(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sid := r.URL.Query().Get("sessionId")
		raw, ok := bufferBody(r)
		if r.Method != http.MethodPost || sid == "" || !ok {
			next.ServeHTTP(w, r)
			return
		}
		key := leaseKey(sid, "")
		s.leases.arrived(key, raw)
		h := &bridge.Handover{}
		ctx := bridge.WithHandover(r.Context(), h)
		ctx = context.WithValue(ctx, sseLeaseKey{}, &sseLease{sid: sid, reqID: requestID(raw), h: h})
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

type sseLeaseKey struct{}

// sseLease is what an SSE call leases when it returns.
type sseLease struct {
	sid, reqID string
	h          *bridge.Handover
}

// leaseOnReturn leases what an SSE call handed over, now that its result
// is queued for the session's stream; a session already gone never gets
// it, so the messages go back unseen. Other transports settle elsewhere.
func (s *Server) leaseOnReturn(ctx context.Context) {
	l, ok := ctx.Value(sseLeaseKey{}).(*sseLease)
	if !ok {
		return
	}
	if _, open := s.sessionOwner(l.sid); !open {
		l.h.Return(false)
		return
	}
	// entered only now: its result is queued for the stream after this,
	// so no request can have answered it before
	s.leases.add(leaseKey(l.sid, ""), l.reqID, l.h)
}

// bufferBody reads a request body (already bounded by maxRequestBytes) so
// the ack rule can read its JSON-RPC id, and puts it back for the handler.
func bufferBody(r *http.Request) ([]byte, bool) {
	if r.Body == nil {
		return nil, false
	}
	raw, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(raw))
	return raw, err == nil
}

// errWriter remembers whether the response was written, and whether any
// write failed; each write must finish within timeout. Once the handler
// returned it lets go of the response (finish): mcp-go keeps the writer of
// every POST answered as SSE until its session ends, and through it the
// whole request (headers, context, buffers: ~4 KB a call); a write after
// that fails.
type errWriter struct {
	mu            sync.Mutex
	rw            http.ResponseWriter // nil once finished
	timeout       time.Duration
	left          func() bool // whether the client closed the connection (clientleft.go)
	gone          bool        // it had before the first byte: the response is discarded
	wrote, failed bool
}

var errResponseDone = errors.New("mcp: the HTTP response is complete")

func (w *errWriter) Header() http.Header {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.rw == nil {
		return http.Header{}
	}
	return w.rw.Header()
}

func (w *errWriter) WriteHeader(code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.rw != nil {
		w.rw.WriteHeader(code)
	}
}

func (w *errWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.rw == nil {
		return 0, errResponseDone
	}
	if !w.wrote && !w.gone && w.left != nil && w.left() {
		w.gone, w.failed = true, true // nothing goes out: the messages return unseen
	}
	if w.gone { // discarded without an error: mcp-go would log one for every client timeout
		return len(p), nil
	}
	w.deadline()
	n, err := w.rw.Write(p)
	if n > 0 { // part of a result that then failed may have been read
		w.wrote = true
	}
	if err != nil {
		w.failed = true
	}
	return n, err
}

func (w *errWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.flush()
}

// flush pushes buffered bytes to the connection (mu held): an error there
// is a write that failed.
func (w *errWriter) flush() {
	if w.rw == nil || w.gone {
		return
	}
	w.deadline()
	if err := http.NewResponseController(w.rw).Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		w.failed = true
	}
}

// deadline gives the next write its bound (mu held): a client that stops
// reading fails the write instead of pinning the call and its messages.
func (w *errWriter) deadline() {
	if w.timeout > 0 {
		_ = http.NewResponseController(w.rw).SetWriteDeadline(time.Now().Add(w.timeout))
	}
}

// started reports whether any of the response was written.
func (w *errWriter) started() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.wrote
}

// Unwrap is the response (nil once finished), for http.ResponseController.
func (w *errWriter) Unwrap() http.ResponseWriter {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rw
}

// finish flushes what the handler left buffered (net/http would write it
// only after the handler returned, out of sight), lifts the write bound
// off the connection for its next request, lets go of the response and
// reports what was written.
func (w *errWriter) finish() (wrote, failed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.rw != nil && w.wrote {
		w.flush()
	}
	if w.rw != nil && w.timeout > 0 {
		_ = http.NewResponseController(w.rw).SetWriteDeadline(time.Time{})
	}
	w.rw = nil
	return w.wrote, w.failed
}
