package broker

import (
	"crypto/tls"
	"fmt"
	"strings"
	"syscall"
	"testing"
)

// TestConnectHintReset: under TLS 1.3 a refused client certificate can
// surface as a reset on the first write, not as the alert: the hint still
// says what to check, with or without a client certificate configured.
func TestConnectHintReset(t *testing.T) {
	reset := fmt.Errorf("write tcp 127.0.0.1:1->127.0.0.1:2: %w", syscall.ECONNRESET)
	withCert := &tls.Config{Certificates: []tls.Certificate{{}}}
	if h := connectHint(reset, withCert); !strings.Contains(h, "refused this gateway's client certificate") {
		t.Errorf("with a client cert: %q", h)
	}
	if h := connectHint(reset, &tls.Config{}); !strings.Contains(h, "requires a client certificate") {
		t.Errorf("without one: %q", h)
	}
	if h := connectHint(reset, nil); h != "" {
		t.Errorf("plain amqp:// reset: %q, want no TLS hint", h)
	}
}
