package gateway

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/audit"
	"github.com/herdbridge/herdbridge/bridge/broker"
	"github.com/herdbridge/herdbridge/bridge/embedded"
	"github.com/herdbridge/herdbridge/bridge/split"
	"github.com/herdbridge/herdbridge/bridge/store"
	"github.com/herdbridge/herdbridge/herdr"
	"github.com/herdbridge/herdbridge/keys"
	"github.com/herdbridge/herdbridge/mcp"
	"github.com/herdbridge/herdbridge/metrics"
	"github.com/herdbridge/herdbridge/opsui"
)

// Config is every setting of one gateway. The zero value of a field is
// its default.
type Config struct {
	StateDir string // required: registry, inboxes, keys, the admin socket
	Listen   string // HTTP address for MCP (default 127.0.0.1:7077; loopback unless TLSCert is set)
	Host     string // this host's id
	NoSync   bool   // skip fsync: a process crash still loses nothing, an OS crash or power loss can
	// Broker is the amqp[s]:// URI of the broker gateways meet on, or a
	// comma list of its nodes (tried in a shuffled order, the connection
	// moving to another when it is lost); empty: the configuration file's
	// broker/brokers, else the embedded transport.
	Broker string
	// QueueType is the broker queues' type: auto, classic or quorum
	// (README "Queue types"). Empty: the configuration file's, else auto.
	QueueType string
	// BrokerOutage is what a message for another host does while the
	// broker is unreachable: "spool" (default: kept in this gateway's
	// outbox, published when it returns; the send says queued) or "fail"
	// (the send fails within BrokerWait). Empty: the configuration file's.
	BrokerOutage string
	// BrokerWait bounds how long a publish waits for an unreachable broker
	// before it is spooled or fails (default: the configuration file's, else 5s).
	BrokerWait time.Duration
	// amqps://: CA bundle verifying the broker, client certificate and key
	BrokerCA, BrokerCert, BrokerKey string
	// PEM certificate (chain) and its key: HTTPS, and Listen may be non-loopback
	TLSCert, TLSKey string
	// TrustReload is how often a running gateway looks for trust file
	// changes (default 2s).
	TrustReload time.Duration
	// Seal is auto | require | off (sealed bodies across hosts, seal.go);
	// empty: the configuration file's, else auto.
	Seal string
	// History keeps every local entity's history (--history); File.History
	// may too.
	History bool
	File    FileConfig    // the configuration file's settings (LoadFile)
	Core    bridge.Config // tuning; Transport, Store, Host, Logger and the trust fields are set by Open
	Logger  *slog.Logger  // nil: discard

	unsigned bool // benchmarks only: no signing, no verification (the cost of trust, measured)
}

// Gateway is one gateway: core, transport, MCP over HTTP and the local
// admin socket. Open it, Run it, Close it. Tests run it in-process on
// 127.0.0.1:0.
type Gateway struct {
	cfg     Config
	log     *slog.Logger
	addr    string      // actual HTTP address
	tlsConf *tls.Config // from TLSCert/TLSKey; nil: plain HTTP on loopback

	herdr    *herdr.Client
	watcher  *herdr.Watcher // nil: herdr disabled
	nudger   *herdr.PaneNudger
	tr       bridge.Transport
	split    *split.Transport // with a broker: tr
	store    *store.Store
	core     *bridge.Core
	mcp      *mcp.Server
	http     *http.Server
	shutdown func(context.Context) error
	audit    *audit.Log
	ring     *keys.Ring     // trusted keys (across hosts only)
	seals    *keys.SealKeys // this host's HPKE keys (across hosts only)
	sock, ln net.Listener
	net      NetConfig      // File.Net with its defaults
	uids     uidCounter     // admin socket connections per peer uid
	feed     *opsui.Feed    // the operator page's live feed (operator.go)
	logins   *opsui.Logins  // operator login codes and sessions
	ui       *opsui.Handler // the operator page at /ui

	// what /metrics reads (metrics.go)
	local  *embedded.Transport // the embedded transport: tr, or split's same-host side
	broker *broker.Transport   // with a broker: split's remote side
	// queueType is the broker queues' type and why (queuetype.go)
	queueType broker.QueueTypeChoice
	metrics   *metrics.Metrics
	// operatorAuth accepts an operator credential on the read-only views
	// (readAuthorized); nil: entity tokens only.
	operatorAuth func(*http.Request) bool

	// life is cancelled by Close: the context of the pane nudger and of
	// everything Run starts.
	life   context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	running chan struct{} // closed when Run returns; nil until Run starts
	closed  bool
}

// Info is InfoName's content: written to the state dir so local tools
// find a running gateway.
type Info struct {
	URL  string `json:"url"`
	Host string `json:"host"`
	PID  int    `json:"pid"`
}

const (
	// SocketName is the admin socket's file in the state dir.
	SocketName = "gateway.sock"
	// InfoName is the file in the state dir that names a running
	// gateway's URL, host and pid (removed by Close).
	InfoName  = "gateway.json"
	stateName = "state.db"
	queueName = "transport.db"
	// historyDir is the state dir's directory of entity histories.
	historyDir = "history"
)

// Open opens the state (transport, store, keys, audit log), starts the
// core and binds the HTTP listener and the admin socket, so startup errors
// (a busy port, a refused broker, a host id in use) come from here. It
// serves nothing until Run.
func Open(ctx context.Context, cfg Config) (*Gateway, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:7077"
	}
	if cfg.TrustReload <= 0 {
		cfg.TrustReload = 2 * time.Second
	}
	if cfg.Broker == "" { // the command line wins over the file
		cfg.Broker = strings.Join(broker.ParseURLs(append([]string{cfg.File.Broker}, cfg.File.Brokers...)...), ",")
	}
	g := &Gateway{cfg: cfg, log: cfg.Logger, net: cfg.File.Net.withDefaults()}
	g.life, g.cancel = context.WithCancel(context.WithoutCancel(ctx))
	if err := g.open(ctx); err != nil {
		g.cancel()
		g.closeState()
		return nil, err
	}
	return g, nil
}

func (g *Gateway) open(ctx context.Context) error {
	if err := g.checkListen(); err != nil {
		return err
	}
	dir := g.cfg.StateDir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("gateway: state dir %s: %w", dir, err)
	}
	if fi, err := os.Stat(dir); err == nil && fi.Mode().Perm()&0o077 != 0 {
		g.log.Warn("state dir is readable by other users: chmod 700 it", "stateDir", dir, "mode", fi.Mode().Perm().String())
	}
	if err := checkStores(dir); err != nil {
		return err
	}
	if err := g.openTransport(ctx); err != nil {
		return err
	}
	var err error
	if g.store, err = store.Open(filepath.Join(dir, stateName), 0); err != nil {
		return err
	}
	cfg := g.coreConfig()
	if g.cfg.Broker != "" && !g.cfg.unsigned {
		if err := g.setupTrust(&cfg); err != nil {
			return err
		}
	}
	if g.audit, err = audit.Open(filepath.Join(dir, auditName), g.log); err != nil {
		return err
	}
	cfg.Audit = g.audit
	g.observers(&cfg)
	g.openMetrics(&cfg)
	g.operatorAuth = g.operator // /metrics also reads with the operator page's session
	g.wireHerdr(&cfg)
	if g.core, err = bridge.New(cfg); err != nil {
		return err
	}
	// the MCP server is built on the core, and is the core's first nudger:
	// cfg.Nudger reaches it through g.mcp, set here before Start runs the
	// nudge loop
	g.mcp = mcp.New(g.core, g.log)
	g.watchPanes()
	if err := g.core.Start(g.life); err != nil {
		return err
	}
	if g.split != nil {
		// the outbox pump reports what it cannot deliver to the core,
		// which tells the sender
		g.split.Start(g.core.Undeliverable)
	}
	if err := g.listenSocket(); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", g.cfg.Listen)
	if err != nil {
		return fmt.Errorf("gateway: listen on %s: %w (is another gateway running? pick another with --listen)", g.cfg.Listen, err)
	}
	g.addr = ln.Addr().String()
	g.ln = g.wrapTLS(newSteadyListener(ln, "http", g.net.MaxConns, g.log))
	handler, shutdown := g.mcp.Handler(mcp.HTTPOptions{})
	handler = g.withMetrics(handler)
	g.shutdown = shutdown
	g.ui = g.operatorPage()
	handler = g.withOperatorPage(handler)
	// every path, /metrics and /ui included, refuses a foreign Host or
	// Origin before anything else (DNS rebinding)
	handler = mcp.LocalOnly(handler)
	// No ReadTimeout or WriteTimeout: SSE and streamable-HTTP GET streams
	// live for the whole session. A silent new connection is closed after
	// ReadHeaderTimeout, an idle keep-alive one after IdleTimeout.
	g.http = &http.Server{Handler: handler,
		ConnContext:       mcp.ConnContext, // the ack rule checks whether a client closed its connection
		ReadHeaderTimeout: time.Duration(g.net.ReadHeaderTimeout),
		IdleTimeout:       time.Duration(g.net.IdleTimeout),
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelWarn)} // TLS handshake errors and the like, structured
	g.http.RegisterOnShutdown(g.ui.Stop) // Shutdown waits for idle connections: end the page's streams
	g.writeInfo()
	return nil
}

// openTransport opens the broker transport, or the embedded one when no
// broker is configured.
func (g *Gateway) openTransport(ctx context.Context) error {
	if g.cfg.Broker == "" {
		tr, err := embedded.Open(filepath.Join(g.cfg.StateDir, queueName), embedded.Options{Logger: g.log, NoSync: g.cfg.NoSync})
		if err != nil {
			return err // no typed nil in g.tr: closeState would call it
		}
		g.tr, g.local = tr, tr
		return nil
	}
	urls := broker.ParseURLs(g.cfg.Broker)
	tlsConf, err := brokerTLS(g.cfg.BrokerCA, g.cfg.BrokerCert, g.cfg.BrokerKey)
	if err != nil {
		return err
	}
	if err := broker.CheckURLs(urls, tlsConf); err != nil {
		return fmt.Errorf("gateway: --broker: %w", err)
	}
	opts, err := g.splitOptions()
	if err != nil {
		return err
	}
	qtype, err := g.chooseQueueType(ctx, tlsConf)
	if err != nil {
		return err
	}
	remote, err := broker.Open(ctx, broker.Options{URLs: urls, TLS: tlsConf, Logger: g.log, DownWait: opts.Bound, Overflow: g.cfg.File.BrokerOverflow,
		QueueType: qtype.Type})
	if err != nil {
		return err
	}
	if remote.QueueType() != qtype.Type {
		qtype = broker.QueueTypeChoice{Type: remote.QueueType(), Why: "the broker is LavinMQ, which has no quorum queues"}
	}
	g.queueType = qtype
	g.rememberQueueType(qtype)
	g.log.Info("broker queue type", "queueType", qtype.Type, "why", qtype.Why)
	// same-host messages, and the outbox of cross-host ones the broker
	// cannot take, live in the embedded store: the file the gateway uses
	// without a broker, so switching modes strands nothing
	local, err := embedded.Open(filepath.Join(g.cfg.StateDir, queueName), embedded.Options{Logger: g.log, NoSync: g.cfg.NoSync})
	if err != nil {
		remote.Close()
		return err
	}
	tr, err := split.New(local, remote, opts)
	if err != nil {
		remote.Close()
		local.Close()
		return err
	}
	g.tr, g.split, g.local, g.broker = tr, tr, local, remote
	return nil
}

// splitOptions are the split transport's options: the flags' outage mode
// and bound, else the configuration file's, and the file's outbox caps.
func (g *Gateway) splitOptions() (split.Options, error) {
	f := g.cfg.File
	mode := g.cfg.BrokerOutage
	if mode == "" {
		mode = f.BrokerOutage
	}
	m, err := split.ParseMode(mode)
	if err != nil {
		return split.Options{}, fmt.Errorf("gateway: %w", err)
	}
	wait := g.cfg.BrokerWait
	if wait <= 0 {
		wait = time.Duration(f.BrokerWait)
	}
	if wait <= 0 {
		wait = 5 * time.Second
	}
	return split.Options{Host: g.cfg.Host, Outage: m, Bound: wait, OutboxMaxMessages: f.OutboxMaxMessages,
		OutboxMaxBytes: f.OutboxMaxBytes, Logger: g.log}, nil
}

// coreConfig is the core's configuration: the tuning of Config.Core, the
// configuration file's values where Core leaves them zero, and the state
// Open opened.
func (g *Gateway) coreConfig() bridge.Config {
	cfg := g.cfg.Core
	cfg.Host, cfg.Transport, cfg.Store, cfg.Logger = g.cfg.Host, g.tr, g.store, g.log
	if cfg.InjectWait == 0 {
		cfg.InjectWait = time.Duration(g.cfg.File.Herdr.InjectWait)
	}
	if cfg.ReceiptWait == 0 {
		cfg.ReceiptWait = time.Duration(g.cfg.File.ReceiptWait)
	}
	if cfg.InboxMaxLength == 0 {
		cfg.InboxMaxLength = g.cfg.File.InboxMaxLength
	}
	if cfg.ResultMaxBytes == 0 {
		cfg.ResultMaxBytes = g.cfg.File.ResultMaxBytes
	}
	if cfg.StaleAfter == 0 {
		cfg.StaleAfter = time.Duration(g.cfg.File.StaleAfter)
	}
	if cfg.ReapAfter == 0 {
		cfg.ReapAfter = time.Duration(g.cfg.File.ReapAfter)
	}
	if cfg.DeliveryLease == 0 {
		cfg.DeliveryLease = time.Duration(g.cfg.File.DeliveryLease)
	}
	cfg.Spawn = g.spawnLimits()
	cfg.RolePolicy.WorkersMayBrief = cfg.RolePolicy.WorkersMayBrief || g.cfg.File.RolePolicy.WorkersMayBrief
	hc := g.cfg.File.History
	cfg.History = bridge.HistoryConfig{Dir: filepath.Join(g.cfg.StateDir, historyDir), All: g.cfg.History || hc.All,
		MaxBytes: hc.MaxBytes, MaxAge: time.Duration(hc.MaxAge)}
	return cfg
}

// spawnLimits are the configuration's caps and per-profile policies, with
// worktrees made under the state dir.
func (g *Gateway) spawnLimits() bridge.SpawnLimits {
	l := bridge.SpawnLimits{MaxWorkers: g.cfg.File.MaxWorkers, Profiles: map[string]bridge.ProfilePolicy{},
		WorktreeDir: filepath.Join(g.cfg.StateDir, "worktrees")}
	for name, p := range g.cfg.File.Profiles {
		l.Profiles[name] = p.ProfilePolicy
	}
	return l
}

// wireHerdr gives the core what it needs of herdr, all in its Config: the
// forward path into worker panes (Injector), spawn (Panes: the herdr
// spawner with this host's profiles), and the nudgers — the MCP sessions,
// and reminders typed into a primary's pane. With herdr disabled only the
// MCP sessions are nudged (and this host can still spawn on others).
func (g *Gateway) wireHerdr(cfg *bridge.Config) {
	sessions := bridge.NudgerFunc(func(e bridge.Entity, h bridge.HeldSummary) { g.mcp.Nudge(e, h) })
	cfg.Nudger = sessions
	hc := g.cfg.File.Herdr
	if hc.Disabled {
		g.log.Info("herdr integration disabled: briefs to workers in panes are held for bridge_poll")
		return
	}
	g.herdr = &herdr.Client{Path: hc.Socket, Logger: g.log}
	cfg.Injector = &herdr.Injector{Client: g.herdr, BriefDir: filepath.Join(g.cfg.StateDir, "briefs"),
		MaxInline: hc.MaxInlineBrief}
	cfg.Panes = &herdr.Spawner{Client: g.herdr, ReadyWait: time.Duration(hc.SpawnReadyWait), Profiles: g.cfg.File.Profiles, StateDir: g.cfg.StateDir}
	if hc.PaneNudge == nil || *hc.PaneNudge {
		g.nudger = &herdr.PaneNudger{Client: g.herdr, Log: g.log, Backoff: time.Duration(hc.NudgeBackoff),
			StillHeld: func(gid string) (bridge.HeldSummary, bool) { return g.core.Held(gid) }}
		g.nudger.Start(g.life) // arms it: each reminder runs on its own goroutine until life ends, Close waits
		cfg.Nudger = bridge.Nudgers{sessions, g.nudger}
	}
}

// watchPanes prepares the herdr pane watcher Run runs: pane status for the
// roster, and a closed pane removes its entity.
func (g *Gateway) watchPanes() {
	if g.herdr == nil {
		return
	}
	g.watcher = &herdr.Watcher{
		Client:   g.herdr,
		Log:      g.log,
		Panes:    g.core.Panes,
		OnStatus: g.core.PaneStatus,
		OnClosed: func(pane string) { g.core.PaneClosed(g.life, pane) },
	}
}

// Run serves MCP over HTTP and the admin socket, follows herdr's panes and
// reloads the trust file, until ctx ends or Close is called; then it shuts
// the servers down and returns once every goroutine it started has. Every
// one of them runs under one errgroup: the first that fails stops the
// others, and Run returns its error (nil on a requested stop, including a
// Close before Run began).
func (g *Gateway) Run(ctx context.Context) error {
	g.mu.Lock()
	switch {
	case g.closed:
		g.mu.Unlock()
		return nil // Close won the race with a `go g.Run(ctx)`: a requested stop
	case g.running != nil:
		g.mu.Unlock()
		return errors.New("gateway: Run called twice")
	}
	done := make(chan struct{})
	g.running = done
	g.mu.Unlock()
	defer close(done)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopOnClose := context.AfterFunc(g.life, cancel)
	defer stopOnClose()
	eg, ctx := errgroup.WithContext(ctx)
	// socket sessions end only after the core was told it is stopping, so
	// the calls they cut leave their asks open for after a restart
	serveCtx, stopSessions := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSessions()
	eg.Go(func() error {
		if err := g.http.Serve(g.ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("gateway: http server: %w", err)
		}
		return nil
	})
	eg.Go(func() error { return g.acceptSocket(serveCtx, eg) })
	if g.watcher != nil {
		eg.Go(func() error { g.watcher.Run(ctx); return nil })
	}
	if g.ring != nil {
		eg.Go(func() error { g.ring.Watch(ctx, g.cfg.TrustReload); return nil })
	}
	if g.seals != nil {
		eg.Go(func() error { g.seals.Watch(ctx, g.cfg.TrustReload); return nil })
	}
	eg.Go(func() error {
		<-ctx.Done()
		g.core.Stopping()
		stopSessions()
		g.stopServing()
		return nil
	})
	transport := "embedded"
	if g.cfg.Broker != "" {
		transport = "broker"
	}
	g.log.Info("gateway serving", "url", g.URL(), "socket", g.SocketPath(), "stateDir", g.cfg.StateDir, "host", g.core.Host(), "transport", transport)
	return eg.Wait()
}

// stopServing ends the MCP sessions and closes both listeners.
func (g *Gateway) stopServing() {
	g.core.Stopping() // the asks of the calls cut now are resumed after a restart, not abandoned
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = g.shutdown(ctx)
	_ = g.http.Shutdown(ctx)
	_ = g.http.Close()
	// again, now that no request is served: a call that came between the
	// first pass and the listener's close could have opened a session
	_ = g.shutdown(ctx)
	_ = g.ln.Close() // in case Serve had not taken it yet
	_ = g.sock.Close()
}

func (g *Gateway) writeInfo() {
	info, _ := json.Marshal(Info{URL: g.URL(), Host: g.core.Host(), PID: os.Getpid()})
	if err := os.WriteFile(filepath.Join(g.cfg.StateDir, InfoName), info, 0o600); err != nil {
		g.log.Warn("cannot write gateway.json", "err", err)
	}
}

// checkLoopback refuses an HTTP listener that is not on loopback: bearer
// tokens and message bodies would cross the network in clear (SPEC §8).
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("gateway: --listen %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("gateway: refusing to serve MCP on %q: only loopback addresses (127.0.0.1, ::1, localhost) are allowed until TLS is configured (--tls-cert FILE --tls-key FILE), since tokens would cross the network in clear", addr)
}

// URL is the HTTP base of the gateway.
func (g *Gateway) URL() string {
	if g.tlsConf != nil {
		return "https://" + g.addr
	}
	return "http://" + g.addr
}

// Addr is the address the HTTP listener is bound to (Listen with its
// port resolved).
func (g *Gateway) Addr() string { return g.addr }

// SocketPath is the admin socket.
func (g *Gateway) SocketPath() string { return filepath.Join(g.cfg.StateDir, SocketName) }

// StateDir is the gateway's state directory.
func (g *Gateway) StateDir() string { return g.cfg.StateDir }

// Host is this gateway's host id.
func (g *Gateway) Host() string { return g.cfg.Host }

// Core is the running bridge core.
func (g *Gateway) Core() *bridge.Core { return g.core }

// ReloadTrust rereads the trust file now, as the running gateway does
// every TrustReload; a no-op on the embedded transport (nothing is signed).
func (g *Gateway) ReloadTrust() error {
	if g.ring == nil {
		return nil
	}
	return g.ring.Reload()
}

// Close stops Run (and waits for it), then closes the core and the state.
// Idempotent; safe whether or not Run was called.
func (g *Gateway) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	running := g.running
	g.mu.Unlock()
	g.cancel()
	if running != nil {
		<-running
	} else {
		g.stopServing()
	}
	if g.nudger != nil {
		g.nudger.Wait()
	}
	g.closeState()
	_ = os.Remove(filepath.Join(g.cfg.StateDir, InfoName))
	return nil
}

// closeState closes what open opened, in reverse; safe on a partial open.
func (g *Gateway) closeState() {
	if g.sock != nil {
		_ = g.sock.Close()
	}
	if g.ln != nil {
		_ = g.ln.Close()
	}
	if g.core != nil {
		g.core.Close()
	}
	if g.audit != nil {
		if err := g.audit.Close(); err != nil {
			g.log.Error("audit log", "err", err)
		}
	}
	if g.store != nil {
		g.store.Close()
	}
	if g.tr != nil {
		g.tr.Close()
	}
}
