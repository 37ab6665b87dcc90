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
	id    string
	notes chan mcpgo.JSONRPCNotification
	init  atomic.Bool
	level atomic.Value // mcpgo.LoggingLevel
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
	_ server.ClientSession      = (*connSession)(nil)
	_ server.SessionWithLogging = (*connSession)(nil)
)

// ServeConn runs one MCP session for entity gid over r/w (newline-delimited
// JSON-RPC, as stdio) until r ends or ctx is done. Requests run
// concurrently; closing the stream cancels the calls still running.
func (s *Server) ServeConn(ctx context.Context, gid string, r io.Reader, w io.Writer) error {
	sess := &connSession{id: "sock-" + uuid.NewString(), notes: make(chan mcpgo.JSONRPCNotification, 256)}
	ctx, cancel := context.WithCancel(WithEntity(ctx, gid))
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
		if len(probe.ID) == 0 { // notification: in order, inline
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
			// messages this call hands over are acked only once its result
			// is written to the socket (SPEC §4)
			h := &bridge.Handover{}
			resp := s.mcp.HandleMessage(bridge.WithHandover(ctx, h), raw)
			delivered := false
			// a call cut by the gateway's shutdown gets no answer here:
			// the stdio relay re-issues it (bridge_send, _broadcast and
			// _ask carry a request_id) or tells the client to call again
			if resp != nil && ctx.Err() == nil {
				if werr := write(resp); werr != nil {
					cancel()
				} else {
					delivered = true
				}
			}
			h.Settle(delivered)
		}()
	}
	if e := sc.Err(); e != nil && !errors.Is(e, io.EOF) {
		err = e
	}
	cancel()
	wg.Wait()
	return err
}
