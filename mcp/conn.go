package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/herdbridge/herdbridge/bridge"
)

// MaxConcurrentCalls bounds the requests one stdio session runs at once.
// mcp-go's own stdio server runs 5 and queues the rest, which starves agents
// that hold several long-polls open; this session runs up to this many.
const MaxConcurrentCalls = 256

// maxLine bounds one JSON-RPC message on the socket.
const maxLine = 4 << 20

// connSession is an MCP session over one stream (the unix socket that
// `herdbridge mcp` relays its stdio to). Unlike mcp-go's stdio server it
// has a unique id, so any number of them share one MCPServer.
type connSession struct {
	id         string
	notes      chan mcpgo.JSONRPCNotification
	init       atomic.Bool
	level      atomic.Value // mcpgo.LoggingLevel
	clientInfo              // the client's clientInfo, for its wait ceiling (clients.go)
}

func (c *connSession) SessionID() string                                     { return c.id }
func (c *connSession) NotificationChannel() chan<- mcpgo.JSONRPCNotification { return c.notes }
func (c *connSession) Initialize()                                           { c.init.Store(true) }
func (c *connSession) Initialized() bool                                     { return c.init.Load() }
func (c *connSession) SetLogLevel(l mcpgo.LoggingLevel)                      { c.level.Store(l) }
func (c *connSession) GetLogLevel() mcpgo.LoggingLevel {
	if l, ok := c.level.Load().(mcpgo.LoggingLevel); ok {
		return l
	}
	return mcpgo.LoggingLevelInfo
}

var (
	_ server.ClientSession         = (*connSession)(nil)
	_ server.SessionWithLogging    = (*connSession)(nil)
	_ server.SessionWithClientInfo = (*connSession)(nil)
)

// ServeConn runs one MCP session for entity gid over r/w (newline-delimited
// JSON-RPC, as stdio) until r ends or ctx is done. Requests run
// concurrently; closing the stream cancels the calls still running. What a
// call hands over is acked once its result is written to the stream.
func (s *Server) ServeConn(ctx context.Context, gid string, r io.Reader, w io.Writer) error {
	return s.ServeConnWith(ctx, gid, r, w, ConnOptions{})
}

// ConnOptions configure a stream session.
type ConnOptions struct {
	// ConfirmResults: the peer is the stdio relay, which tells with a
	// ResultNotice whether it wrote each result to its client (one the
	// client cancelled first, it does not write). What a call handed over
	// is acked on that word, not when the result reaches the socket.
	ConfirmResults bool
}

// ResultNotice is the notification the stdio relay sends after each
// result: params {"id": the request's id, "delivered": whether the client
// got it}. A gateway that does not know it ignores it, as MCP says of
// unknown notifications.
const ResultNotice = "notifications/herdbridge/result"

// ServeConnWith is ServeConn with options.
func (s *Server) ServeConnWith(ctx context.Context, gid string, r io.Reader, w io.Writer, opts ConnOptions) error {
	sess := &connSession{id: "sock-" + uuid.NewString(), notes: make(chan mcpgo.JSONRPCNotification, 256)}
	ctx, cancelCause := context.WithCancelCause(WithEntity(ctx, gid))
	cancel := func() { cancelCause(errSessionClosed) } // the stream ended or broke: the session with it
	defer cancel()
	if err := s.mcp.RegisterSession(ctx, sess); err != nil {
		return err
	}
	defer s.mcp.UnregisterSession(context.WithoutCancel(ctx), sess.id)
	s.track(sess, gid)
	ctx = s.mcp.WithContext(ctx, sess)

	var wmu sync.Mutex
	bw := bufio.NewWriter(w)
	write := func(v any) error {
		raw, err := json.Marshal(v)
		if err != nil {
			return err
		}
		wmu.Lock()
		defer wmu.Unlock()
		if _, err := bw.Write(append(raw, '\n')); err != nil {
			return err
		}
		return bw.Flush()
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // notifications
		defer wg.Done()
		for {
			select {
			case n := <-sess.notes:
				if err := write(n); err != nil {
					cancel()
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	sem := make(chan struct{}, MaxConcurrentCalls)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	var err error
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		raw := json.RawMessage(append([]byte(nil), line...))
		var probe struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(raw, &probe) != nil {
			_ = write(mcpgo.JSONRPCError{JSONRPC: mcpgo.JSONRPC_VERSION, Error: mcpgo.NewJSONRPCErrorDetails(mcpgo.PARSE_ERROR, "parse error", nil)})
			continue
		}
		if probe.Method == "" {
			continue // a response to a server request; none are sent on this transport
		}
		if v := unservedRevision(raw); v != "" { // 2026-07-28: negotiate down (revisions.go)
			if len(probe.ID) > 0 {
				_ = write(unservedError(probe.ID, v))
			}
			continue
		}
		if len(probe.ID) == 0 { // notification: in order, inline
			if probe.Method == ResultNotice {
				s.confirmed(sess.id, raw)
				continue
			}
			s.mcp.HandleMessage(ctx, raw)
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			// messages this call hands over are acked only once the
			// client has its result (SPEC §4): written to the socket, or
			// with a relay that confirms, on its word
			h := &bridge.Handover{}
			resp := s.mcp.HandleMessage(bridge.WithHandover(ctx, h), raw)
			// a call cut by the gateway's shutdown gets no answer here:
			// the stdio relay re-issues it (bridge_send, _broadcast and
			// _ask carry a request_id) or tells the client to call again
			if resp == nil || ctx.Err() != nil {
				h.Return(false)
				return
			}
			key, id := leaseKey(sess.id, ""), requestID(raw)
			if opts.ConfirmResults {
				// leased before the write: the relay's word may come back
				// before this goroutine runs again
				s.leases.add(key, id, h)
			}
			if werr := write(resp); werr != nil {
				cancel()
				s.leases.take(key, func(l *leased) bool { return l.h == h })
				h.Return(false) // no whole line reached the relay
				return
			}
			if !opts.ConfirmResults {
				h.Ack()
			}
		}()
	}
	if e := sc.Err(); e != nil && !errors.Is(e, io.EOF) {
		err = e
	}
	cancel()
	wg.Wait()
	return err
}

// confirmed applies the relay's ResultNotice: the call's messages are
// acked when its client got the result, else held again (unseen: the relay
// did not write it to the client).
func (s *Server) confirmed(sid string, raw []byte) {
	var n struct {
		Params struct {
			ID        json.RawMessage `json:"id"`
			Delivered bool            `json:"delivered"`
		} `json:"params"`
	}
	if json.Unmarshal(raw, &n) != nil {
		return
	}
	id := canonicalID(n.Params.ID)
	for _, l := range s.leases.take(leaseKey(sid, ""), func(l *leased) bool { return l.reqID == id }) {
		if n.Params.Delivered {
			l.h.Ack()
		} else {
			l.h.Return(false)
		}
	}
}
