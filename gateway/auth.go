package gateway

// Local authentication: who may use the gateway's admin socket (the
// peer's uid), revoking bearer tokens (`herdbridge register --revoke`), and
// TLS on the HTTP listener (--tls-cert/--tls-key), without which it stays
// on loopback.

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// peer is the process at the other end of a unix socket connection.
type peer struct {
	uid uint32
	pid int // -1 where the system does not report it
}

var errNoPeerCred = errors.New("peer credentials are not available on this system")

// peerAllowed lets a socket connection through only if its peer runs as
// the gateway's effective uid. The socket is 0600 inside a 0700 state dir,
// so another user should not get this far; this check holds even if those
// modes were loosened (a chmod, a shared state dir). A refused peer gets one
// error line in the socket's reply framing (a Reply JSON line), and the
// connection is closed. Every peer uid, this one's included, holds at most
// SocketMaxConnsPerUID connections at once: one past it is refused at once,
// without lingering, so a flood from one user cannot fill the socket's
// connection cap. An allowed connection's count is given back by release.
func (g *Gateway) peerAllowed(c net.Conn) (release func(), ok bool) {
	nop := func() {}
	uc, ok := unwrapConn(c).(*net.UnixConn)
	if !ok {
		return nop, true
	}
	euid := uint32(os.Geteuid())
	p, err := peerCred(uc)
	switch {
	case errors.Is(err, errNoPeerCred):
		return nop, true // only the file modes protect the socket here
	case err != nil:
		g.log.Warn("socket peer refused: cannot read its credentials", "err", err)
		refusePeer(c, fmt.Sprintf("refused: the gateway cannot read your credentials (%v)", err))
		return nil, false
	}
	if ok, n := g.uids.take(p.uid); !ok {
		if n > 0 {
			g.log.Warn("socket peers refused: their uid holds too many connections", "peerUid", p.uid, "refused", n, "socketMaxConnsPerUid", g.uids.max)
		}
		raw, _ := json.Marshal(Reply{Error: fmt.Sprintf("refused: uid %d already holds %d connections to this socket (net.socketMaxConnsPerUid in the gateway's config.json)", p.uid, g.uids.max)})
		_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		_, _ = c.Write(append(raw, '\n'))
		c.Close()
		return nil, false
	}
	release = func() { g.uids.put(p.uid) }
	if p.uid != euid {
		g.log.Warn("socket peer refused: it runs as another user", "peerUid", p.uid, "peerPid", p.pid, "gatewayUid", euid)
		refusePeer(c, fmt.Sprintf("refused: this gateway's socket serves only uid %d, and you are uid %d", euid, p.uid))
		release()
		return nil, false
	}
	return release, true
}

// refusePeer writes msg as an error reply, reads (and drops) what the peer
// had sent for a moment, so closing with unread data does not reset the
// connection before the peer reads the reply, and closes it.
func refusePeer(c net.Conn, msg string) {
	defer c.Close()
	raw, _ := json.Marshal(Reply{Error: msg})
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write(append(raw, '\n')); err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10))
}

// sockRevoke is the socket op "revoke": every token of the entity named
// name stops working now, and calls running on its HTTP sessions are
// cancelled.
func (g *Gateway) sockRevoke(name string) Reply {
	if name == "" {
		return Reply{Error: "revoke needs a name"}
	}
	e, n, err := g.core.RevokeTokens(name)
	if err != nil {
		return Reply{Error: err.Error()}
	}
	cancelled := g.mcp.CancelHTTPCalls(e.GID)
	g.log.Info("revoked over the socket", bridge.LogGID, e.GID, "name", e.Name, "tokens", n, "cancelledCalls", cancelled)
	return Reply{OK: true, Entity: &e, Tokens: n}
}

// RevokeTokens is `herdbridge register --revoke --name N`: every token of
// the entity named name stops working. Through the admin socket if a
// gateway runs on stateDir (the tokens stop working at once, open HTTP
// calls are cancelled), else directly in its state file (the next gateway
// does not know them). It returns the entity and how many tokens it
// revoked.
func RevokeTokens(stateDir, name string) (bridge.Entity, int, error) {
	if name == "" {
		return bridge.Entity{}, 0, errors.New("register --revoke needs --name")
	}
	if !Answers(stateDir) {
		return bridge.RevokeStoredTokens(filepath.Join(stateDir, stateName), name)
	}
	r, err := Ask(stateDir, Request{Op: "revoke", Name: name})
	if err != nil {
		return bridge.Entity{}, 0, err
	}
	return *r.Entity, r.Tokens, nil
}

// checkListen checks --listen against the TLS flags: with a certificate
// (loaded here, so a bad one stops the start with the file named) any
// address; without, loopback only.
func (g *Gateway) checkListen() error {
	certFile, keyFile, listen := g.cfg.TLSCert, g.cfg.TLSKey, g.cfg.Listen
	if (certFile == "") != (keyFile == "") {
		return errors.New("gateway: --tls-cert and --tls-key go together: give both (HTTPS, any --listen address) or neither (plain HTTP on loopback)")
	}
	if certFile == "" {
		return checkLoopback(listen)
	}
	if _, _, err := net.SplitHostPort(listen); err != nil {
		return fmt.Errorf("gateway: --listen %q: %w", listen, err)
	}
	conf, err := loadTLS(certFile, keyFile)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(keyFile); err == nil && fi.Mode().Perm()&0o077 != 0 {
		g.log.Warn("TLS key is readable by other users: chmod 600 it", "file", keyFile, "mode", fi.Mode().Perm().String())
	}
	g.tlsConf = conf
	return nil
}

// loadTLS reads a PEM certificate (chain) and its key.
func loadTLS(certFile, keyFile string) (*tls.Config, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("gateway: --tls-cert: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("gateway: --tls-key: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("gateway: TLS certificate %s with key %s: %w", certFile, keyFile, err)
	}
	if cert.Leaf != nil && time.Now().After(cert.Leaf.NotAfter) {
		return nil, fmt.Errorf("gateway: TLS certificate %s expired on %s", certFile, cert.Leaf.NotAfter.Format(time.RFC3339))
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"http/1.1"}, // what the MCP transports are tested on
	}, nil
}

// wrapTLS serves ln over TLS when a certificate is configured.
func (g *Gateway) wrapTLS(ln net.Listener) net.Listener {
	if g.tlsConf == nil {
		return ln
	}
	return tls.NewListener(ln, g.tlsConf)
}
