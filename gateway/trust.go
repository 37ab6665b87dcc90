package gateway

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/keys"
)

// auditName is the append-only audit log in the state dir.
const auditName = "audit.log"

// ringVerifier adapts keys.Ring to bridge.Verifier.
type ringVerifier struct{ r *keys.Ring }

func (v ringVerifier) Verify(host string, msg, sig []byte) error {
	err := v.r.Verify(host, msg, sig)
	if errors.Is(err, keys.ErrUnknownHost) {
		return fmt.Errorf("%w: %s (add it with `herdbridge keys trust %s KEY`)", bridge.ErrUnknownHost, host, host)
	}
	return err
}

// setupTrust loads (or creates, on first start) the host key and the trust
// ring, and has cfg sign and verify; Run watches the trust file. Only
// across hosts: on the embedded transport nothing leaves this machine.
func (g *Gateway) setupTrust(cfg *bridge.Config) error {
	k, created, err := keys.LoadOrCreate(g.cfg.StateDir, g.cfg.Host)
	if err != nil {
		return fmt.Errorf("gateway: host key: %w", err)
	}
	if created {
		g.log.Info("created a host key: give its public half to the other hosts (`herdbridge keys show`, then `herdbridge keys trust "+g.cfg.Host+" KEY` there)", "fingerprint", keys.Fingerprint(k.Public()))
	}
	ring, err := keys.NewRing(g.cfg.StateDir, g.cfg.Host, g.log)
	if err != nil {
		return fmt.Errorf("gateway: trust file: %w", err)
	}
	if n := len(ring.Hosts()); n <= 1 {
		g.log.Warn("no other host is trusted yet: messages from other hosts will be refused until you run `herdbridge keys trust HOST KEY`", "trustFile", keys.TrustFile)
	}
	g.ring = ring
	cfg.Signer, cfg.Verifier = k, ringVerifier{ring}
	cfg.KeyFingerprint = keys.Fingerprint(k.Public())
	cfg.Trusted = ring.Hosts // published in the heartbeat: peers see whether this host trusts them
	return g.setupSeal(cfg)
}

// brokerTLS builds the TLS configuration for amqps:// from a CA bundle and
// an optional client certificate; nil when none is given (the system roots
// then verify the broker).
func brokerTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	if caFile == "" && certFile == "" && keyFile == "" {
		return nil, nil
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("gateway: --broker-cert and --broker-key go together")
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("gateway: --broker-ca: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("gateway: --broker-ca %s: no PEM certificate in it", caFile)
		}
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("gateway: --broker-cert/--broker-key: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}
