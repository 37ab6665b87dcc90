package mcp

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/herdbridge/herdbridge/bridge"
)

// sockSessionPrefix starts the id of a socket session (ServeConn).
const sockSessionPrefix = "sock-"

// httpRequests are the bearer-authenticated HTTP requests in flight, by
// entity, so revoking an entity's tokens can cut them off: a long poll, an
// SSE stream, a streamable HTTP GET stream.
type httpRequests struct {
	mu    sync.Mutex
	next  uint64
	byGID map[string]map[uint64]context.CancelCauseFunc
}

// authenticate maps token to its entity and ties the request to it: the
// returned context is cancelled by CancelHTTPCalls(gid), and done releases
// it. The token is checked again once the request is registered, so a
// revocation cannot slip in between the check and the registration.
func (s *Server) authenticate(ctx context.Context, token string) (bridge.Entity, context.Context, func(), bool) {
	e, ok := s.core.Authenticate(token)
	if !ok {
		return bridge.Entity{}, nil, nil, false
	}
	ctx, cancel := context.WithCancelCause(ctx)
	rq := &s.reqs
	rq.mu.Lock()
	if rq.byGID == nil {
		rq.byGID = map[string]map[uint64]context.CancelCauseFunc{}
	}
	if rq.byGID[e.GID] == nil {
		rq.byGID[e.GID] = map[uint64]context.CancelCauseFunc{}
	}
	rq.next++
	id := rq.next
	rq.byGID[e.GID][id] = cancel
	rq.mu.Unlock()
	done := func() {
		rq.mu.Lock()
		if m := rq.byGID[e.GID]; m != nil {
			delete(m, id)
			if len(m) == 0 {
				delete(rq.byGID, e.GID)
			}
		}
		rq.mu.Unlock()
		cancel(nil)
	}
	if _, ok := s.core.Authenticate(token); !ok { // revoked meanwhile
		done()
		return bridge.Entity{}, nil, nil, false
	}
	return e, ctx, done, true
}

// errTokenRevoked is why a call's context ends when its entity's tokens
// are revoked.
var errTokenRevoked = errors.New("the entity's tokens were revoked")

// CancelHTTPCalls cuts off gid's HTTP side once its tokens were revoked:
// every bearer-authenticated request in flight (a long poll, an SSE stream,
// a streamable HTTP GET stream) is cancelled, and so are the calls still
// running on its HTTP sessions (SSE runs them off the POST that carried
// them). A cancelled call puts what it had claimed back to held; the next
// request with a revoked token gets 401. Socket sessions (`herdbridge mcp`),
// which authenticate by the socket, are left alone; the HTTP sessions end.
// It returns how many requests and calls it cancelled.
func (s *Server) CancelHTTPCalls(gid string) int {
	var cancels []context.CancelCauseFunc
	s.reqs.mu.Lock()
	for _, cancel := range s.reqs.byGID[gid] {
		cancels = append(cancels, cancel)
	}
	s.reqs.mu.Unlock()
	var ended []string
	s.mu.Lock()
	for sid, si := range s.sessions {
		if si.gid != gid || strings.HasPrefix(sid, sockSessionPrefix) {
			continue
		}
		ended = append(ended, sid)
		for _, cancel := range si.cancels {
			cancels = append(cancels, cancel)
		}
	}
	s.mu.Unlock()
	for _, cancel := range cancels {
		cancel(errTokenRevoked)
	}
	// the sessions themselves end too: their next request is a 401 anyway,
	// and a streamable HTTP session with no request open (a 2025-11-25
	// client between calls) would otherwise keep the entity attached until
	// its idle timeout
	for _, sid := range ended {
		s.mcp.UnregisterSession(context.Background(), sid)
	}
	return len(cancels)
}
