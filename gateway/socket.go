package gateway

// The admin socket: a 0600 unix socket in the state dir that local
// commands (`herdbridge register`, `roster`, `stats`, `dlq`, `remove`, `doctor`,
// `register --revoke`, `trace`) and the stdio relay (`herdbridge mcp`) talk to. One
// JSON request line, one JSON reply line; for "mcp" the connection then
// carries the entity's MCP session. Both ends live here.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker"
	"github.com/herdbridge/herdbridge/mcp"
)

// Request is the first line a local client sends on the admin socket.
type Request struct {
	Op     string   `json:"op"` // register | mcp | roster | stats | dlq | remove | revoke | history-purge | trace | doctor | ui-login
	Name   string   `json:"name,omitempty"`
	Role   string   `json:"role,omitempty"`
	Groups []string `json:"groups,omitempty"`
	PaneID string   `json:"paneId,omitempty"`
	Limit  int      `json:"limit,omitempty"`
	// Claim identifies the live session of an "mcp" request (bridge.Claimant
	// says what makes two the same; its Pane is taken from PaneID). The
	// relay sends the same one on every reconnect.
	Claim *bridge.Claimant `json:"claim,omitempty"`
	// Takeover ("mcp", "register"): take the name from the live session
	// holding it instead of being refused.
	Takeover bool `json:"takeover,omitempty"`
	// History ("mcp", "register"): turn the entity's history on or off;
	// absent leaves it as it is.
	History *bool `json:"history,omitempty"`
	// ConfirmResults ("mcp"): the relay tells after each result whether
	// its client got it (mcp.ResultNotice); the session acks on that word.
	ConfirmResults bool `json:"confirmResults,omitempty"`
	// ID ("trace") is the traceId or msgId to trace; WaitMs bounds the
	// wait for the other hosts' answers (0: bridge.TraceWait).
	ID     string `json:"id,omitempty"`
	WaitMs int64  `json:"waitMs,omitempty"`
}

// Reply is the gateway's answer line.
type Reply struct {
	OK     bool                      `json:"ok"`
	Error  string                    `json:"error,omitempty"`
	Entity *bridge.Entity            `json:"entity,omitempty"`
	Token  string                    `json:"token,omitempty"`
	URL    string                    `json:"url,omitempty"`
	Roster *bridge.RosterView        `json:"roster,omitempty"`
	Dead   []bridge.DeadLetterRecord `json:"dead,omitempty"`
	Tokens int                       `json:"tokens,omitempty"` // op revoke: how many tokens it revoked
	Purged int                       `json:"purged,omitempty"` // op history-purge: how many history files it deleted
	Stats  *Stats                    `json:"stats,omitempty"`
	Trace  *bridge.TraceReport       `json:"trace,omitempty"`
	Doctor *DoctorReport             `json:"doctor,omitempty"`
	Login  string                    `json:"login,omitempty"` // op ui-login: the one-time link to the operator page
	// Code says what kind of refusal Error is: CodeNameHeld, or empty.
	Code string `json:"code,omitempty"`
}

// CodeNameHeld is Reply.Code when a live session of another claimant
// holds the name (bridge.ClaimError).
const CodeNameHeld = "name_held"

// replyErr is the reply for err, with its Code.
func replyErr(err error) Reply {
	r := Reply{Error: err.Error()}
	var ce *bridge.ClaimError
	if errors.As(err, &ce) {
		r.Code = CodeNameHeld
	}
	return r
}

// Stats is `herdbridge stats`: what a gateway refused, by reason (SPEC
// §3's checks), and where its audit log is.
type Stats struct {
	Host         string            `json:"host"`
	Key          string            `json:"key,omitempty"`
	Signing      bool              `json:"signing"`
	Refused      map[string]uint64 `json:"refused"`
	Audit        string            `json:"audit"`
	AuditDropped uint64            `json:"auditDropped"`
	AuditError   string            `json:"auditError,omitempty"`
	// Runtime: goroutines, heap, RSS and open files of the gateway process.
	Runtime *RuntimeStats `json:"runtime,omitempty"`
	// Delay is whether the broker's delay exchange is in use (with a
	// broker only): "bridge.delay: on", or off and why.
	Delay string `json:"delay,omitempty"`
	// QueueType is the type of the broker's queues and why (with --broker).
	QueueType *broker.QueueTypeChoice `json:"queueType,omitempty"`
	// Broker is the broker node connected to (nil: embedded transport).
	Broker *broker.Link `json:"broker,omitempty"`
	// Presence is what this gateway holds of other hosts now: a count
	// read without building a roster (make scale polls it to time
	// convergence).
	Presence PresenceCounts `json:"presence"`
}

// PresenceCounts: other hosts whose gateways are present, and their
// entities this gateway holds.
type PresenceCounts struct {
	Hosts    int `json:"hosts"`
	Entities int `json:"entities"`
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
	g.sock = newSteadyListener(ln, "socket", g.net.SocketMaxConns, g.log)
	g.uids.max = g.net.SocketMaxConnsPerUID
	return nil
}

// acceptSocket serves the admin socket until it is closed (Accept fails
// for nothing else: see steadyListener); each connection runs on eg, so
// Run waits for it.
func (g *Gateway) acceptSocket(ctx context.Context, eg *errgroup.Group) error {
	for {
		c, err := g.sock.Accept()
		if err != nil {
			return nil // closed by stopServing
		}
		eg.Go(func() error {
			if release, ok := g.peerAllowed(c); ok { // closes c if not
				defer release()
				g.serveSocket(ctx, c)
			}
			return nil
		})
	}
}

func (g *Gateway) serveSocket(ctx context.Context, c net.Conn) {
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReaderSize(c, 64<<10)
	line, err := br.ReadSlice('\n') // at most the buffer: a request line is small
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			raw, _ := json.Marshal(Reply{Error: "request line over 64 KiB"})
			_, _ = c.Write(append(raw, '\n'))
		}
		return
	}
	line = append([]byte(nil), line...)
	_ = c.SetReadDeadline(time.Time{})
	var req Request
	reply := func(r Reply) error {
		raw, _ := json.Marshal(r)
		_, err := c.Write(append(raw, '\n'))
		return err
	}
	if err := json.Unmarshal(line, &req); err != nil {
		_ = reply(Reply{Error: "bad request: " + err.Error()})
		return
	}
	switch req.Op {
	case "register":
		e, tok, err := g.core.Register(ctx, bridge.RegisterRequest{Name: req.Name, Role: bridge.Role(req.Role), Groups: req.Groups, PaneID: req.PaneID,
			Token: true, Takeover: req.Takeover, History: req.History})
		if err != nil {
			_ = reply(replyErr(err))
			return
		}
		_ = reply(Reply{OK: true, Entity: &e, URL: g.URL(), Token: tok})
	case "mcp":
		var who bridge.Claimant
		if req.Claim != nil {
			who = *req.Claim
		}
		who.Pane = req.PaneID
		e, release, err := g.core.Claim(ctx, bridge.RegisterRequest{Name: req.Name, Role: bridge.Role(req.Role), Groups: req.Groups, PaneID: req.PaneID,
			Takeover: req.Takeover, History: req.History}, who, func() { c.Close() })
		if err != nil {
			// the refused agent's client may show only "connection closed":
			// the operator's log says why
			g.log.Warn("mcp session refused", "name", req.Name, "pid", who.PID, "err", err)
			_ = reply(replyErr(err))
			return
		}
		defer release()
		if reply(Reply{OK: true, Entity: &e, URL: g.URL()}) != nil {
			return
		}
		if err := g.mcp.ServeConnWith(ctx, e.GID, br, c, mcp.ConnOptions{ConfirmResults: req.ConfirmResults}); err != nil {
			g.log.Debug("socket session ended", bridge.LogGID, e.GID, "err", err)
		}
	case "roster":
		v := g.core.Roster()
		_ = reply(Reply{OK: true, Roster: &v})
	case "stats":
		_ = reply(Reply{OK: true, Stats: g.stats()})
	case "dlq":
		d, err := g.core.DeadLetters(req.Limit)
		if err != nil {
			_ = reply(Reply{Error: err.Error()})
			return
		}
		_ = reply(Reply{OK: true, Dead: d})
	case "remove":
		e, err := g.core.Resolve(req.Name)
		if err == nil {
			err = g.core.Remove(ctx, e.GID)
		}
		if err != nil {
			_ = reply(Reply{Error: err.Error()})
			return
		}
		_ = reply(Reply{OK: true, Entity: &e})
	case "revoke":
		_ = reply(g.sockRevoke(req.Name))
	case "doctor":
		_ = reply(Reply{OK: true, Doctor: g.DoctorReport(ctx)})
	case "ui-login":
		_ = reply(g.sockUILogin())
	case "history-purge":
		_ = reply(g.sockPurgeHistory(req.Name))
	case "trace":
		rep, err := g.core.Trace(ctx, req.ID, time.Duration(req.WaitMs)*time.Millisecond)
		if err != nil {
			_ = reply(Reply{Error: err.Error()})
			return
		}
		_ = reply(Reply{OK: true, Trace: rep})
	default:
		_ = reply(Reply{Error: fmt.Sprintf("unknown op %q (register, mcp, roster, stats, dlq, remove, revoke, history-purge, trace, doctor, ui-login)", req.Op)})
	}
}

func (g *Gateway) stats() *Stats {
	cc := g.core.Config()
	st := &Stats{Host: g.cfg.Host, Key: cc.KeyFingerprint, Signing: cc.Signer != nil,
		Refused: g.core.Refused(), Audit: filepath.Join(g.cfg.StateDir, auditName)}
	if st.Refused == nil {
		st.Refused = map[string]uint64{}
	}
	st.AuditDropped = g.audit.Dropped()
	st.Runtime = readRuntimeStats()
	if g.broker != nil {
		st.Delay = g.broker.DelayState().String()
		qt := g.queueType
		st.QueueType = &qt
	}
	st.Broker = g.brokerLink()
	st.Presence.Hosts, st.Presence.Entities = g.core.RemoteCounts()
	if err := g.audit.Err(); err != nil {
		st.AuditError = err.Error()
	}
	return st
}

// Dial opens the admin socket of the gateway on stateDir and sends req.
// On success the caller owns the connection (for op "mcp" it carries the
// session; br holds what the gateway sent past the reply line).
func Dial(stateDir string, req Request) (c net.Conn, br *bufio.Reader, r Reply, err error) {
	path := filepath.Join(stateDir, SocketName)
	c, err = net.DialTimeout("unix", path, 3*time.Second)
	if err != nil {
		return nil, nil, Reply{}, fmt.Errorf("no gateway answers on %s (%v): start one with `herdbridge gateway --state-dir %s`", path, err, stateDir)
	}
	raw, _ := json.Marshal(req)
	if _, err := c.Write(append(raw, '\n')); err != nil {
		c.Close()
		return nil, nil, Reply{}, err
	}
	br = bufio.NewReaderSize(c, 64<<10)
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := br.ReadBytes('\n')
	if err != nil {
		c.Close()
		return nil, nil, Reply{}, fmt.Errorf("gateway on %s closed the connection: %w", path, err)
	}
	_ = c.SetReadDeadline(time.Time{})
	if err := json.Unmarshal(line, &r); err != nil {
		c.Close()
		return nil, nil, Reply{}, fmt.Errorf("gateway sent a bad reply: %w", err)
	}
	if !r.OK {
		c.Close()
		return nil, nil, r, errors.New(strings.TrimSpace(r.Error))
	}
	return c, br, r, nil
}

// Ask sends one request to the gateway on stateDir and returns its reply:
// Dial for every op but "mcp".
func Ask(stateDir string, req Request) (Reply, error) {
	c, _, r, err := Dial(stateDir, req)
	if err != nil {
		return r, err
	}
	c.Close()
	return r, nil
}

// Answers reports whether something listens on stateDir's admin socket;
// false only when nothing does (no socket, or a stale one from a crash).
func Answers(stateDir string) bool {
	c, err := net.DialTimeout("unix", filepath.Join(stateDir, SocketName), 3*time.Second)
	if err == nil {
		c.Close()
		return true
	}
	return !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.ECONNREFUSED)
}
