package main

// Local authentication: who may use the gateway's unix socket (the peer's
// uid), revoking bearer tokens (`herdbridge register --revoke`), and TLS on
// the HTTP listener (--tls-cert/--tls-key), without which it stays on
// loopback.

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
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
// error line in the socket's reply framing (a sockReply JSON line), and the
// connection is closed.
func (g *Gateway) peerAllowed(c net.Conn) bool {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return true
	}
	euid := uint32(os.Geteuid())
	p, err := peerCred(uc)
	switch {
	case errors.Is(err, errNoPeerCred):
		return true // only the file modes protect the socket here
	case err != nil:
		g.Logger.Warn("socket peer refused: cannot read its credentials", "err", err)
		refusePeer(c, fmt.Sprintf("refused: the gateway cannot read your credentials (%v)", err))
		return false
	case p.uid != euid:
		g.Logger.Warn("socket peer refused: it runs as another user", "peerUid", p.uid, "peerPid", p.pid, "gatewayUid", euid)
		refusePeer(c, fmt.Sprintf("refused: this gateway's socket serves only uid %d, and you are uid %d", euid, p.uid))
		return false
	}
	return true
}

// refusePeer writes msg as an error reply, reads (and drops) what the peer
// had sent for a moment, so closing with unread data does not reset the
// connection before the peer reads the reply, and closes it.
func refusePeer(c net.Conn, msg string) {
	defer c.Close()
	raw, _ := json.Marshal(sockReply{Error: msg})
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write(append(raw, '\n')); err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10))
}

// sockRevoke is the socket op "revoke": every token of the entity named
// name stops working now, and calls running on its HTTP sessions are
// cancelled.
func (g *Gateway) sockRevoke(name string) sockReply {
	if name == "" {
		return sockReply{Error: "revoke needs a name"}
	}
	e, n, err := g.core.RevokeTokens(name)
	if err != nil {
		return sockReply{Error: err.Error()}
	}
	cancelled := g.mcp.CancelHTTPCalls(e.GID)
	g.Logger.Info("revoked over the socket", bridge.LogGID, e.GID, "name", e.Name, "tokens", n, "cancelledCalls", cancelled)
	return sockReply{OK: true, Entity: &e, Tokens: n}
}

// cmdRevoke is `herdbridge register --revoke --name N`: through the
// gateway's socket if one runs on dir (the tokens stop working at once),
// else directly in its state file (the next gateway does not know them).
func cmdRevoke(dir, name string, stdout io.Writer) error {
	if name == "" {
		return errors.New("register --revoke needs --name")
	}
	var (
		e bridge.Entity
		n int
	)
	if gatewayAnswers(dir) {
		c, _, r, err := dialGateway(dir, sockRequest{Op: "revoke", Name: name})
		if err != nil {
			return err
		}
		c.Close()
		e, n = *r.Entity, r.Tokens
	} else {
		var err error
		if e, n, err = bridge.RevokeStoredTokens(filepath.Join(dir, stateName), name); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "revoked %d token(s) of %s; register again to get a new one\n", n, e.Name)
	return nil
}

// gatewayAnswers reports whether something listens on dir's socket; false
// only when nothing does (no socket, or a stale one from a crash).
func gatewayAnswers(dir string) bool {
	c, err := net.DialTimeout("unix", filepath.Join(dir, sockName), 3*time.Second)
	if err == nil {
		c.Close()
		return true
	}
	return !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.ECONNREFUSED)
}

// checkListen checks --listen against the TLS flags: with a certificate
// (loaded here, so a bad one stops the start with the file named) any
// address; without, loopback only.
func (g *Gateway) checkListen() error {
	if (g.TLSCert == "") != (g.TLSKey == "") {
		return errors.New("gateway: --tls-cert and --tls-key go together: give both (HTTPS, any --listen address) or neither (plain HTTP on loopback)")
	}
	if g.TLSCert == "" {
		return checkLoopback(g.Listen)
	}
	if _, _, err := net.SplitHostPort(g.Listen); err != nil {
		return fmt.Errorf("gateway: --listen %q: %w", g.Listen, err)
	}
	conf, err := loadTLS(g.TLSCert, g.TLSKey)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(g.TLSKey); err == nil && fi.Mode().Perm()&0o077 != 0 {
		g.Logger.Warn("TLS key is readable by other users: chmod 600 it", "file", g.TLSKey, "mode", fi.Mode().Perm().String())
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
