// Package mcp is the gateway's MCP face: one mcp-go server offering the
// bridge tools and the inbox resource, served over streamable HTTP (/mcp),
// SSE (/sse) and the local unix socket that `herdbridge mcp` relays stdio
// to. Identity always comes from the connection (a bearer token, or the
// registration that opened the socket session), never from a tool argument.
// It calls the bridge core and owns no message state.
package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/herdbridge/herdbridge/bridge"
)

// Version is reported to MCP clients.
var Version = "0.1.0"

// InboxURI is the resource that peeks at the caller's held messages.
const InboxURI = "bridge://inbox"

type ctxKey struct{}

// WithEntity puts the calling entity's gid in ctx.
func WithEntity(ctx context.Context, gid string) context.Context {
	return context.WithValue(ctx, ctxKey{}, gid)
}

// EntityFrom is the one accessor every tool uses for identity.
func EntityFrom(ctx context.Context) (string, bool) {
	gid, ok := ctx.Value(ctxKey{}).(string)
	return gid, ok && gid != ""
}

// Server is the MCP server of one gateway.
type Server struct {
	core *bridge.Core
	fab  Fabric // the core as the tools call it (fabric.go)
	log  *slog.Logger
	mcp  *server.MCPServer
	// nonce draws the fence nonces of this server's results: newNonce,
	// read once here, so a test that swaps it for a scripted one changes
	// its own servers only, never a call another test's server still runs
	nonce func() string

	// maxWait is the gateway's --max-wait: the longest any call waits
	// (less for a client whose ceiling is lower: clients.go).
	maxWait time.Duration

	mu       sync.Mutex
	sessions map[string]*sessionInfo // MCP session id -> whose, and its open calls
	reqs     httpRequests            // HTTP requests in flight, cut off when their entity's tokens are revoked
	events   *boundedEventStore      // streamable HTTP's, set by Handler
	leases   leaseBook               // results written, awaiting evidence the client has them
}

type sessionInfo struct {
	gid string
	// cs is the session as mcp-go registered it: nudges are queued on
	// its notification channel (see notify).
	cs      server.ClientSession
	cancels map[int64]context.CancelCauseFunc
	next    int64
	// level is the least severe log level the client asked for with
	// logging/setLevel ("" until it does: then info and above are sent).
	level mcpgo.LoggingLevel
	// subs are the resources the client subscribed to (resources/subscribe),
	// listens those named by its open subscriptions/listen streams
	// (2026-07-28): only they get notifications/resources/updated.
	subs    map[string]bool
	listens map[string]int
}

func (si *sessionInfo) subscribed(uri string) bool { return si.subs[uri] || si.listens[uri] > 0 }

func (si *sessionInfo) listen(req *mcpgo.SubscriptionsListenRequest, delta int) {
	for _, uri := range req.Params.Notifications.ResourceSubscriptions {
		if n := si.listens[uri] + delta; n > 0 {
			si.listens[uri] = n
		} else {
			delete(si.listens, uri)
		}
	}
}

// New builds the MCP server for core.
func New(core *bridge.Core, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{core: core, log: log, sessions: map[string]*sessionInfo{}, maxWait: bridge.DefaultMaxWait, nonce: newNonce}
	if core != nil {
		s.fab = core
		s.maxWait = core.Config().MaxWait // the tool descriptions state it
	}
	hooks := &server.Hooks{}
	hooks.AddOnRequestInitialization(func(_ context.Context, _ any, msg any) error {
		// the transports answer a revision they do not serve (HTTP: its
		// option, the socket: ServeConn); this is SSE's backstop
		if raw, ok := msg.(json.RawMessage); ok {
			if v := unservedRevision(raw); v != "" {
				return fmt.Errorf("MCP revision %s is not served here: use one of %s (initialize)", v, strings.Join(Revisions, ", "))
			}
		}
		return nil
	})
	hooks.AddOnRegisterSession(func(ctx context.Context, cs server.ClientSession) {
		if gid, ok := EntityFrom(ctx); ok {
			s.track(cs, gid)
		}
	})
	hooks.AddOnUnregisterSession(func(ctx context.Context, cs server.ClientSession) { s.untrack(cs.SessionID()) })
	// mcp-go answers logging/setLevel and resources/(un)subscribe itself
	// but its HTTP sessions keep no subscriptions and default to different
	// log levels; the nudges read what these hooks record per session.
	hooks.AddAfterSetLevel(func(ctx context.Context, _ any, req *mcpgo.SetLevelRequest, _ *mcpgo.EmptyResult) {
		s.updateSession(ctx, func(si *sessionInfo) { si.level = req.Params.Level })
	})
	hooks.AddAfterSubscribe(func(ctx context.Context, _ any, req *mcpgo.SubscribeRequest, _ *mcpgo.EmptyResult) {
		s.updateSession(ctx, func(si *sessionInfo) { si.subs[req.Params.URI] = true })
	})
	hooks.AddAfterUnsubscribe(func(ctx context.Context, _ any, req *mcpgo.UnsubscribeRequest, _ *mcpgo.EmptyResult) {
		s.updateSession(ctx, func(si *sessionInfo) { delete(si.subs, req.Params.URI) })
	})
	hooks.AddBeforeSubscriptionsListen(func(ctx context.Context, _ any, req *mcpgo.SubscriptionsListenRequest) {
		s.updateSession(ctx, func(si *sessionInfo) { si.listen(req, +1) })
	})
	hooks.AddAfterSubscriptionsListen(func(ctx context.Context, _ any, req *mcpgo.SubscriptionsListenRequest, _ *mcpgo.SubscriptionsListenResult) {
		s.updateSession(ctx, func(si *sessionInfo) { si.listen(req, -1) })
	})
	hooks.AddOnError(func(ctx context.Context, _ any, method mcpgo.MCPMethod, msg any, _ error) {
		if req, ok := msg.(*mcpgo.SubscriptionsListenRequest); ok && method == mcpgo.MethodSubscriptionsListen {
			s.updateSession(ctx, func(si *sessionInfo) { si.listen(req, -1) })
		}
	})
	s.mcp = server.NewMCPServer("herdbridge", Version,
		server.WithToolCapabilities(false),
		server.WithResourceCapabilities(true, false),
		server.WithLogging(),
		server.WithRecovery(),
		server.WithHooks(hooks),
		server.WithInstructions("herdbridge connects coding agents. bridge_send briefs a worker or reports back to a primary; "+
			"bridge_ask asks the entity that briefed you; bridge_poll drains messages held for you (filter with target); "+
			"bridge_broadcast tells everyone or a group; bridge_roster lists who is here. Calls that wait return status=pending "+
			"with what to call next instead of timing out."),
	)
	for _, t := range s.tools() {
		s.mcp.AddTool(t.Tool, t.Handler)
	}
	s.mcp.AddResource(mcpgo.NewResource(InboxURI, "inbox",
		mcpgo.WithResourceDescription("Messages held for you, peeked without consuming. Subscribe to be told when something arrives."),
		mcpgo.WithMIMEType("application/json")), s.readInbox)
	return s
}

// ResumeEvents is what the streamable HTTP event store keeps now, across
// sessions: events and their bytes (zero before Handler).
func (s *Server) ResumeEvents() (events, bytes int) {
	if s.events == nil {
		return 0, 0
	}
	return s.events.stats()
}

// MCP returns the mcp-go server (for transports and in-process clients).
func (s *Server) MCP() *server.MCPServer { return s.mcp }

func (s *Server) track(cs server.ClientSession, gid string) {
	sid := cs.SessionID()
	if sid == "" {
		return
	}
	s.mu.Lock()
	if _, ok := s.sessions[sid]; ok {
		s.mu.Unlock()
		return
	}
	s.sessions[sid] = &sessionInfo{gid: gid, cs: cs, cancels: map[int64]context.CancelCauseFunc{}, subs: map[string]bool{}, listens: map[string]int{}}
	s.mu.Unlock()
	s.core.Attach(gid)
	s.log.Debug("mcp session attached", "session", sid, bridge.LogGID, gid)
}

// errSessionClosed is why a call's context ends when its session closes
// (the client went, the relay's socket ended): its tool error says so.
var errSessionClosed = errors.New("the MCP session closed")

// untrack forgets a closed session and cancels its calls still running:
// mcp-go's SSE transport does not cancel handlers when the client goes.
func (s *Server) untrack(sid string) {
	s.mu.Lock()
	si := s.sessions[sid]
	delete(s.sessions, sid)
	var cancels []context.CancelCauseFunc
	if si != nil {
		for _, cancel := range si.cancels { // copied under the lock: calls ending now delete from it
			cancels = append(cancels, cancel)
		}
	}
	s.mu.Unlock()
	s.leases.ended(leaseKey(sid, "")) // what it never confirmed goes back to held
	if si == nil {
		return
	}
	for _, cancel := range cancels {
		cancel(errSessionClosed)
	}
	s.core.Detach(si.gid)
	s.log.Debug("mcp session closed", "session", sid, bridge.LogGID, si.gid, "cancelledCalls", len(cancels))
}

// callContext ties a tool call to its session so closing the session
// cancels it; the returned func releases it.
func (s *Server) callContext(ctx context.Context, gid string) (context.Context, func()) {
	cs := server.ClientSessionFromContext(ctx)
	ctx, cancelCause := context.WithCancelCause(ctx)
	cancel := func() { cancelCause(nil) }
	if cs == nil {
		return ctx, cancel
	}
	sid := cs.SessionID()
	// Sessions are tracked when they register (hook, ServeConn), never
	// here: a stateless HTTP call has an empty or one-off id and must not
	// leave a phantom session behind.
	s.mu.Lock()
	si := s.sessions[sid]
	if si == nil || si.gid != gid {
		s.mu.Unlock()
		return ctx, cancel
	}
	si.next++
	id := si.next
	si.cancels[id] = cancelCause
	s.mu.Unlock()
	return ctx, func() {
		s.mu.Lock()
		delete(si.cancels, id)
		s.mu.Unlock()
		cancel()
	}
}

// updateSession applies f to the tracked session of the request in ctx,
// under the lock.
func (s *Server) updateSession(ctx context.Context, f func(*sessionInfo)) {
	cs := server.ClientSessionFromContext(ctx)
	if cs == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if si := s.sessions[cs.SessionID()]; si != nil {
		f(si)
	}
}

// nudgeTarget is one session of an entity, as a nudge reaches it.
type nudgeTarget struct {
	sid        string
	cs         server.ClientSession
	log        bool // its log level lets an info message through
	subscribed bool // it subscribed to the inbox resource
}

func (s *Server) nudgeTargets(gid string) []nudgeTarget {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []nudgeTarget
	for sid, si := range s.sessions {
		if si.gid == gid {
			out = append(out, nudgeTarget{sid: sid, cs: si.cs,
				log:        si.level == "" || mcpgo.LoggingLevelInfo.ShouldSendTo(si.level),
				subscribed: si.subscribed(InboxURI)})
		}
	}
	return out
}

// Nudge implements bridge.Nudger: on every session of the entity, an info
// log message (unless the session set a higher level with
// logging/setLevel) and notifications/resources/updated for the inbox
// resource (only if the session subscribed to it).
func (s *Server) Nudge(e bridge.Entity, held bridge.HeldSummary) {
	held = boundHeld(held)
	var parts []string
	for _, f := range held.From {
		parts = append(parts, fmt.Sprintf("%d from %s", f.Count, f.FromName))
	}
	if held.MoreFrom > 0 {
		parts = append(parts, fmt.Sprintf("and from %d more senders", held.MoreFrom))
	}
	text := fmt.Sprintf("herdbridge: %d message(s) held for you (%s): call bridge_poll", held.Total, strings.Join(parts, ", "))
	for _, t := range s.nudgeTargets(e.GID) {
		if t.log {
			s.notify(t, mcpgo.MethodNotificationMessage, map[string]any{
				"level": mcpgo.LoggingLevelInfo, "logger": "herdbridge", "data": map[string]any{"text": text, "held": held},
			})
		}
		if t.subscribed {
			s.notify(t, mcpgo.MethodNotificationResourceUpdated, map[string]any{"uri": InboxURI})
		}
	}
}

func (s *Server) readInbox(ctx context.Context, req mcpgo.ReadResourceRequest) ([]mcpgo.ResourceContents, error) {
	gid, ok := EntityFrom(ctx)
	if !ok {
		return nil, fmt.Errorf("herdbridge: this connection has no entity")
	}
	res, err := s.core.Poll(ctx, gid, bridge.PollRequest{Peek: true, Max: 500}, nil)
	if err != nil {
		return nil, err
	}
	res.Fence = resultNonceFrom(s.nonce, res) // as in a tool result: the bodies are a sender's data
	raw, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	return []mcpgo.ResourceContents{mcpgo.TextResourceContents{URI: InboxURI, MIMEType: "application/json", Text: string(raw)}}, nil
}

// HTTPOptions configure the HTTP transports.
type HTTPOptions struct {
	// SessionIdleTTL reclaims streamable HTTP sessions a client abandoned
	// without a DELETE (default 15m).
	SessionIdleTTL time.Duration
	// The event store that lets a client resume a broken stream keeps at
	// most EventsPerSession events and EventBytes bytes per session, and
	// EventTotalBytes across sessions, dropping the oldest (defaults:
	// DefaultEventsPerSession, DefaultEventBytes, DefaultEventTotalBytes).
	EventsPerSession, EventBytes, EventTotalBytes int
	// WriteTimeout bounds each write of a response (default
	// DefaultWriteTimeout): a client that stops reading fails it, and what
	// the call handed over goes back to held.
	WriteTimeout time.Duration
}

// Handler serves streamable HTTP at /mcp and SSE at /sse (+ /message),
// behind bearer-token authentication: a missing or wrong token is a 401
// (an RFC 6750 challenge and a JSON body saying how to get a token) and
// nothing else. Every path refuses a foreign Host (421) and a
// non-loopback Origin (403) first (LocalOnly), and
// /.well-known/ is a 404: no OAuth is advertised.
func (s *Server) Handler(opts HTTPOptions) (http.Handler, func(context.Context) error) {
	if opts.SessionIdleTTL <= 0 {
		opts.SessionIdleTTL = 15 * time.Minute
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	// Without an event store mcp-go drops notifications sent just before
	// a handler returns (the POST stream closes first); its own store
	// keeps every event of a session until the session ends.
	events := newBoundedEventStore(opts.EventsPerSession, opts.EventBytes, opts.EventTotalBytes)
	s.events = events
	streamable := server.NewStreamableHTTPServer(s.mcp,
		server.WithEndpointPath("/mcp"),
		server.WithStreamableHTTPProtocolVersions(Revisions...),
		server.WithEventStore(events),
		server.WithSessionIdleTTL(opts.SessionIdleTTL),
		server.WithStreamableHTTPLogger(s.log),
	)
	sse := server.NewSSEServer(s.mcp,
		server.WithSSEEndpoint("/sse"),
		server.WithMessageEndpoint("/message"),
		server.WithKeepAlive(true),
		server.WithKeepAliveInterval(15*time.Second),
	)
	mux := http.NewServeMux()
	mux.Handle("/mcp", s.auth(s.openSessionGuard(events.resumeGuard(s.streamableHandover(streamable, opts.WriteTimeout)))))
	mux.Handle("/sse", s.auth(sse.SSEHandler()))
	mux.Handle("/message", s.auth(s.sseHandover(sse.MessageHandler())))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/.well-known/", noOAuth)
	shutdown := func(ctx context.Context) error {
		err1 := streamable.Shutdown(ctx)
		err2 := sse.Shutdown(ctx)
		if err1 != nil {
			return err1
		}
		return err2
	}
	return LocalOnly(mux), shutdown
}

func (s *Server) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := bearerToken(r.Header.Get("Authorization"))
		if tok == "" {
			unauthorized(w, false)
			return
		}
		e, ctx, done, ok := s.authenticate(r.Context(), tok)
		if !ok {
			unauthorized(w, true)
			return
		}
		defer done()
		sid := r.Header.Get("Mcp-Session-Id")
		if sid == "" {
			sid = r.URL.Query().Get("sessionId")
		}
		if owner, ok := s.sessionOwner(sid); ok && owner != e.GID {
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "forbidden_session",
				"message": "this MCP session belongs to another entity: open a session of your own (initialize) with your token"})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxRequestBytes)
		next.ServeHTTP(w, r.WithContext(WithEntity(ctx, e.GID)))
	})
}

// openSessionGuard answers 404 to a GET naming an MCP session this server
// does not hold: one ended by DELETE, closed at shutdown, or from before a
// restart. mcp-go would open a new session under that id instead — never
// initialized, keeping its entity attached, and (with the event store) with
// a goroutine pumping its notifications until the idle sweeper, or forever
// when the GET came while the server shut down. The spec's answer to a
// session that ended is 404, upon which a client initializes again.
func (s *Server) openSessionGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sid := r.Header.Get("Mcp-Session-Id"); r.Method == http.MethodGet && sid != "" {
			if _, open := s.sessionOwner(sid); !open {
				writeJSON(w, http.StatusNotFound, map[string]string{"error": "session_not_found",
					"message": "this MCP session is not open (it ended, or the gateway restarted): start a new one with initialize"})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// maxRequestBytes bounds one HTTP request body (tool arguments are held to
// 1 MiB, messages to far less).
const maxRequestBytes = 2 << 20

func (s *Server) sessionOwner(sid string) (string, bool) {
	if sid == "" {
		return "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	si, ok := s.sessions[sid]
	if !ok {
		return "", false
	}
	return si.gid, true
}
