package main

import (
	"bufio"
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

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker"
	"github.com/herdbridge/herdbridge/bridge/embedded"
	"github.com/herdbridge/herdbridge/herdr"
	"github.com/herdbridge/herdbridge/keys"
	"github.com/herdbridge/herdbridge/mcp"
)

// Gateway is one running gateway: core, transport, MCP over HTTP and the
// local unix socket. Tests start it in-process on 127.0.0.1:0.
type Gateway struct {
	StateDir string
	Listen   string
	Host     string
	NoSync   bool   // skip fsync: a process crash still loses nothing, an OS crash or power loss can
	Broker   string // amqp[s]:// URL: gateways meet there; empty: the embedded transport
	Config   Config
	Logger   *slog.Logger
	Core     bridge.Config // tuning; Transport, Store, Host, Logger are set by Start
	TLSCert  string        // PEM certificate (chain) and its key: HTTPS, and --listen may be non-loopback
	// amqps://: CA bundle verifying the broker, client certificate and key
	BrokerCA, BrokerCert, BrokerKey string
	TLSKey                          string

	Addr string // actual HTTP address once started

	herdr    *herdr.Client
	inject   *herdr.Injector
	nudger   *herdr.PaneNudger
	tr       bridge.Transport
	store    *bridge.Store
	core     *bridge.Core
	mcp      *mcp.Server
	http     *http.Server
	shutdown func(context.Context) error
	tlsConf  *tls.Config // from TLSCert/TLSKey; nil: plain HTTP on loopback
	audit    *bridge.AuditLog
	ring     *keys.Ring // trusted keys (across hosts only)
	unsigned bool       // benchmarks only: no signing, no verification (the cost of trust, measured)
	sock     net.Listener
	wg       sync.WaitGroup
	ctx      context.Context
	cancel   context.CancelFunc
	once     sync.Once
}

// gatewayInfo is written to the state dir so local commands find the gateway.
type gatewayInfo struct {
	URL  string `json:"url"`
	Host string `json:"host"`
	PID  int    `json:"pid"`
}

const (
	sockName  = "gateway.sock"
	infoName  = "gateway.json"
	stateName = "state.db"
	queueName = "transport.db"
)

// Start opens the state, starts the core and begins serving.
func (g *Gateway) Start(ctx context.Context) error {
	if g.Logger == nil {
		g.Logger = slog.New(slog.DiscardHandler)
	}
	if g.Listen == "" {
		g.Listen = "127.0.0.1:7077"
	}
	if err := g.checkListen(); err != nil {
		return err
	}
	if err := os.MkdirAll(g.StateDir, 0o700); err != nil {
		return fmt.Errorf("gateway: state dir %s: %w", g.StateDir, err)
	}
	if fi, err := os.Stat(g.StateDir); err == nil && fi.Mode().Perm()&0o077 != 0 {
		g.Logger.Warn("state dir is readable by other users: chmod 700 it", "stateDir", g.StateDir, "mode", fi.Mode().Perm().String())
	}
	g.ctx, g.cancel = context.WithCancel(context.WithoutCancel(ctx))
	var err error
	if g.Broker != "" {
		if !strings.HasPrefix(g.Broker, "amqp://") && !strings.HasPrefix(g.Broker, "amqps://") {
			return fmt.Errorf("gateway: --broker %q: use an amqp:// or amqps:// URL", g.Broker)
		}
		var tlsConf *tls.Config
		if tlsConf, err = brokerTLS(g.BrokerCA, g.BrokerCert, g.BrokerKey); err != nil {
			return err
		}
		g.tr, err = broker.Open(ctx, broker.Options{URL: g.Broker, TLS: tlsConf, Logger: g.Logger})
	} else {
		g.tr, err = embedded.Open(filepath.Join(g.StateDir, queueName), embedded.Options{Logger: g.Logger, NoSync: g.NoSync})
	}
	if err != nil {
		return err
	}
	g.store, err = bridge.OpenStore(filepath.Join(g.StateDir, stateName), 0)
	if err != nil {
		g.tr.Close()
		return err
	}
	cfg := g.Core
	cfg.Host, cfg.Transport, cfg.Store, cfg.Logger = g.Host, g.tr, g.store, g.Logger
	if g.Broker != "" && !g.unsigned {
		if err := g.setupTrust(&cfg); err != nil {
			g.abort()
			return err
		}
	}
	if g.audit, err = bridge.OpenAuditLog(filepath.Join(g.StateDir, auditName), g.Logger); err != nil {
		g.abort()
		return err
	}
	cfg.Audit = g.audit
	if cfg.InjectWait == 0 {
		cfg.InjectWait = time.Duration(g.Config.Herdr.InjectWait)
	}
	if cfg.ReceiptWait == 0 {
		cfg.ReceiptWait = time.Duration(g.Config.ReceiptWait)
	}
	if cfg.InboxMaxLength == 0 {
		cfg.InboxMaxLength = g.Config.InboxMaxLength
	}
	g.core, err = bridge.New(cfg)
	if err != nil {
		g.abort()
		return err
	}
	g.mcp = mcp.New(g.core, g.Logger)
	g.core.SetNudger(g.mcp)
	g.startHerdr()
	if err := g.core.Start(g.ctx); err != nil {
		g.abort()
		return err
	}
	if err := g.listenSocket(); err != nil {
		g.core.Close()
		g.abort()
		return err
	}
	ln, err := net.Listen("tcp", g.Listen)
	if err != nil {
		g.sock.Close()
		g.core.Close()
		g.abort()
		return fmt.Errorf("gateway: listen on %s: %w (is another gateway running? pick another with --listen)", g.Listen, err)
	}
	g.Addr = ln.Addr().String()
	ln = g.wrapTLS(ln)
	handler, shutdown := g.mcp.Handler(mcp.HTTPOptions{})
	g.shutdown = shutdown
	g.http = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(g.Logger.Handler(), slog.LevelWarn)} // TLS handshake errors and the like, structured
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if err := g.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			g.Logger.Error("http server stopped", "err", err)
		}
	}()
	info, _ := json.Marshal(gatewayInfo{URL: g.URL(), Host: g.core.Host(), PID: os.Getpid()})
	if err := os.WriteFile(filepath.Join(g.StateDir, infoName), info, 0o600); err != nil {
		g.Logger.Warn("cannot write gateway.json", "err", err)
	}
	transport := "embedded"
	if g.Broker != "" {
		transport = "broker"
	}
	g.Logger.Info("gateway serving", "url", g.URL(), "socket", g.SocketPath(), "stateDir", g.StateDir, "host", g.core.Host(), "transport", transport)
	return nil
}

// startHerdr connects the core to herdr: the forward path into worker panes,
// pane status following, reminders typed into a primary's pane, and spawn.
func (g *Gateway) startHerdr() {
	hc := g.Config.Herdr
	if hc.Disabled {
		g.Logger.Info("herdr integration disabled: briefs to workers in panes are held for bridge_poll")
		g.mcp.SetSpawner(&spawnService{core: g.core, stateDir: g.StateDir}) // can still spawn on other hosts
		return
	}
	g.herdr = &herdr.Client{Path: hc.Socket, Logger: g.Logger}
	g.inject = &herdr.Injector{Client: g.herdr, BriefDir: filepath.Join(g.StateDir, "briefs"),
		MaxInline: hc.MaxInlineBrief, ReadyWait: time.Duration(hc.ReadyWait)}
	g.core.SetInjector(g.inject)
	nudgers := multiNudger{g.mcp}
	if hc.PaneNudge == nil || *hc.PaneNudge {
		g.nudger = &herdr.PaneNudger{Client: g.herdr, Log: g.Logger, Backoff: time.Duration(hc.NudgeBackoff), StillHeld: g.core.Held}
		g.nudger.Start(g.ctx)
		nudgers = append(nudgers, g.nudger)
	}
	g.core.SetNudger(nudgers)
	spawner := &spawnService{core: g.core, sp: &herdr.Spawner{Client: g.herdr, ReadyWait: time.Duration(hc.SpawnReadyWait)},
		profiles: g.Config.Profiles, stateDir: g.StateDir}
	g.mcp.SetSpawner(spawner)
	g.core.SetProfiles(spawner.Profiles)
	g.core.SetSpawnHandler(spawner.handleRemote)
	w := &herdr.Watcher{
		Client:   g.herdr,
		Log:      g.Logger,
		Panes:    g.core.Panes,
		OnStatus: g.core.PaneStatus,
		OnClosed: func(pane string) { g.core.PaneClosed(g.ctx, pane) },
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		w.Run(g.ctx)
	}()
}

// multiNudger tells every nudger.
type multiNudger []bridge.Nudger

func (m multiNudger) Nudge(e bridge.Entity, h bridge.HeldSummary) {
	for _, n := range m {
		n.Nudge(e, h)
	}
}

// roster is the presence view: every host with its spawn profiles.
func (g *Gateway) roster() bridge.RosterView { return g.core.Roster() }

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
		return "https://" + g.Addr
	}
	return "http://" + g.Addr
}

// SocketPath is the local unix socket.
func (g *Gateway) SocketPath() string { return filepath.Join(g.StateDir, sockName) }

// Core is the running bridge core.
func (g *Gateway) BridgeCore() *bridge.Core { return g.core }

// abort undoes a Start that failed part way: stops what runs on g.ctx,
// then closes the stores.
func (g *Gateway) abort() {
	g.cancel()
	g.wg.Wait()
	g.closeStores()
}

func (g *Gateway) closeStores() {
	if g.audit != nil {
		if err := g.audit.Close(); err != nil {
			g.Logger.Error("audit log", "err", err)
		}
	}
	if g.store != nil {
		g.store.Close()
	}
	if g.tr != nil {
		g.tr.Close()
	}
}

// Close stops serving and closes the state. Idempotent.
func (g *Gateway) Close() error {
	g.once.Do(func() {
		g.cancel()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if g.http != nil {
			_ = g.shutdown(ctx)
			_ = g.http.Shutdown(ctx)
			_ = g.http.Close()
		}
		if g.sock != nil {
			g.sock.Close()
		}
		g.wg.Wait()
		if g.nudger != nil {
			g.nudger.Wait()
		}
		g.core.Close()
		g.closeStores()
		_ = os.Remove(filepath.Join(g.StateDir, infoName))
	})
	return nil
}

func (g *Gateway) listenSocket() error {
	path := g.SocketPath()
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("gateway: a gateway already answers on %s", path)
	}
	_ = os.Remove(path) // stale from a crash
	// No umask games: the umask is process-wide, and changing it even
	// briefly gave files other goroutines created meanwhile (a test's go
	// build output, once) the wrong mode. The socket is born inside the
	// 0700 state dir, so no other user can reach it before the chmod.
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("gateway: unix socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return fmt.Errorf("gateway: chmod %s: %w", path, err)
	}
	g.sock = ln
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			g.wg.Add(1)
			go func() {
				defer g.wg.Done()
				if g.peerAllowed(c) { // closes c if not
					g.serveSocket(c)
				}
			}()
		}
	}()
	return nil
}

// sockRequest is the first line a local client sends on the unix socket.
type sockRequest struct {
	Op     string   `json:"op"` // register | mcp | roster | dlq | remove | revoke
	Name   string   `json:"name,omitempty"`
	Role   string   `json:"role,omitempty"`
	Groups []string `json:"groups,omitempty"`
	PaneID string   `json:"paneId,omitempty"`
	Limit  int      `json:"limit,omitempty"`
}

type sockReply struct {
	OK     bool                      `json:"ok"`
	Error  string                    `json:"error,omitempty"`
	Entity *bridge.Entity            `json:"entity,omitempty"`
	Token  string                    `json:"token,omitempty"`
	URL    string                    `json:"url,omitempty"`
	Roster *bridge.RosterView        `json:"roster,omitempty"`
	Dead   []bridge.DeadLetterRecord `json:"dead,omitempty"`
	Tokens int                       `json:"tokens,omitempty"` // op revoke: how many tokens it revoked
	Stats  *gatewayStats             `json:"stats,omitempty"`
}

// gatewayStats is `herdbridge stats`: what a gateway refused, by reason
// (SPEC §3's checks), and where its audit log is.
type gatewayStats struct {
	Host         string            `json:"host"`
	Key          string            `json:"key,omitempty"`
	Signing      bool              `json:"signing"`
	Refused      map[string]uint64 `json:"refused"`
	Audit        string            `json:"audit"`
	AuditDropped uint64            `json:"auditDropped"`
	AuditError   string            `json:"auditError,omitempty"`
}

func (g *Gateway) serveSocket(c net.Conn) {
	done := make(chan struct{})
	defer close(done)
	defer c.Close()
	go func() {
		select {
		case <-g.ctx.Done():
			c.Close()
		case <-done:
		}
	}()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReaderSize(c, 64<<10)
	line, err := br.ReadSlice('\n') // at most the buffer: a request line is small
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			raw, _ := json.Marshal(sockReply{Error: "request line over 64 KiB"})
			_, _ = c.Write(append(raw, '\n'))
		}
		return
	}
	line = append([]byte(nil), line...)
	_ = c.SetReadDeadline(time.Time{})
	var req sockRequest
	reply := func(r sockReply) error {
		raw, _ := json.Marshal(r)
		_, err := c.Write(append(raw, '\n'))
		return err
	}
	if err := json.Unmarshal(line, &req); err != nil {
		_ = reply(sockReply{Error: "bad request: " + err.Error()})
		return
	}
	switch req.Op {
	case "register", "mcp":
		e, tok, err := g.core.Register(g.ctx, bridge.RegisterRequest{Name: req.Name, Role: bridge.Role(req.Role), Groups: req.Groups, PaneID: req.PaneID, NoToken: req.Op == "mcp"})
		if err != nil {
			_ = reply(sockReply{Error: err.Error()})
			return
		}
		r := sockReply{OK: true, Entity: &e, URL: g.URL()}
		if req.Op == "register" {
			r.Token = tok
		}
		if reply(r) != nil || req.Op == "register" {
			return
		}
		if err := g.mcp.ServeConn(g.ctx, e.GID, br, c); err != nil {
			g.Logger.Debug("socket session ended", bridge.LogGID, e.GID, "err", err)
		}
	case "roster":
		v := g.roster()
		_ = reply(sockReply{OK: true, Roster: &v})
	case "stats":
		st := &gatewayStats{Host: g.Host, Key: g.core.Config().KeyFingerprint, Signing: g.core.Config().Signer != nil,
			Refused: g.core.Refused(), Audit: filepath.Join(g.StateDir, auditName)}
		if st.Refused == nil {
			st.Refused = map[string]uint64{}
		}
		st.AuditDropped = g.audit.Dropped()
		if err := g.audit.Err(); err != nil {
			st.AuditError = err.Error()
		}
		_ = reply(sockReply{OK: true, Stats: st})
	case "dlq":
		d, err := g.core.DeadLetters(req.Limit)
		if err != nil {
			_ = reply(sockReply{Error: err.Error()})
			return
		}
		_ = reply(sockReply{OK: true, Dead: d})
	case "remove":
		e, err := g.core.Resolve(req.Name)
		if err == nil {
			err = g.core.Remove(g.ctx, e.GID)
		}
		if err != nil {
			_ = reply(sockReply{Error: err.Error()})
			return
		}
		_ = reply(sockReply{OK: true, Entity: &e})
	case "revoke":
		_ = reply(g.sockRevoke(req.Name))
	default:
		_ = reply(sockReply{Error: fmt.Sprintf("unknown op %q (register, mcp, roster, stats, dlq, remove, revoke)", req.Op)})
	}
}

// dialGateway opens the local socket of the gateway on stateDir and sends req.
func dialGateway(stateDir string, req sockRequest) (net.Conn, *bufio.Reader, sockReply, error) {
	path := filepath.Join(stateDir, sockName)
	c, err := net.DialTimeout("unix", path, 3*time.Second)
	if err != nil {
		return nil, nil, sockReply{}, fmt.Errorf("no gateway answers on %s (%v): start one with `herdbridge gateway --state-dir %s`", path, err, stateDir)
	}
	raw, _ := json.Marshal(req)
	if _, err := c.Write(append(raw, '\n')); err != nil {
		c.Close()
		return nil, nil, sockReply{}, err
	}
	br := bufio.NewReaderSize(c, 64<<10)
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := br.ReadBytes('\n')
	if err != nil {
		c.Close()
		return nil, nil, sockReply{}, fmt.Errorf("gateway on %s closed the connection: %w", path, err)
	}
	_ = c.SetReadDeadline(time.Time{})
	var r sockReply
	if err := json.Unmarshal(line, &r); err != nil {
		c.Close()
		return nil, nil, sockReply{}, fmt.Errorf("gateway sent a bad reply: %w", err)
	}
	if !r.OK {
		c.Close()
		return nil, nil, r, errors.New(strings.TrimSpace(r.Error))
	}
	return c, br, r, nil
}
