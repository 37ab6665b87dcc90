package broker

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// TestConnectHintRefusedClientCert: under TLS 1.3 a refused client
// certificate surfaces in several forms, depending on which step of the
// AMQP handshake meets it; every one gets the client-certificate hint, with
// or without a client certificate configured, and none gets a TLS hint on
// plain amqp://.
func TestConnectHintRefusedClientCert(t *testing.T) {
	forms := map[string]error{
		"alert":             errors.New("remote error: tls: certificate required"),
		"reset":             fmt.Errorf("write tcp 127.0.0.1:1->127.0.0.1:2: %w", syscall.ECONNRESET),
		"reset as text":     errors.New("read tcp 127.0.0.1:1->127.0.0.1:2: read: connection reset by peer"),
		"EOF":               io.EOF,
		"closed connection": fmt.Errorf("write tcp 127.0.0.1:1->127.0.0.1:2: %w", net.ErrClosed),
		"closed as text":    errors.New("write tcp 127.0.0.1:1->127.0.0.1:2: use of closed network connection"),
		"amqp ErrClosed":    amqp.ErrClosed,
		"ErrClosed as text": errors.New("Exception (504) Reason: \"channel/connection is not open\""),
		"broken pipe":       fmt.Errorf("write: %w", syscall.EPIPE),
		"unexpected EOF":    io.ErrUnexpectedEOF,
	}
	withCert := &tls.Config{Certificates: []tls.Certificate{{}}}
	for name, err := range forms {
		t.Run(name, func(t *testing.T) {
			if h := connectHint(err, &tls.Config{}); !strings.Contains(h, "requires a client certificate") || !strings.Contains(h, "--broker-cert") {
				t.Errorf("without a client cert: %q", h)
			}
			if name == "alert" {
				return // "certificate required" names the missing certificate, whatever is configured
			}
			if h := connectHint(err, withCert); !strings.Contains(h, "client certificate") || !strings.Contains(h, "CA") {
				t.Errorf("with a client cert: %q", h)
			}
			if h := connectHint(err, nil); h != "" {
				t.Errorf("plain amqp://: %q, want no TLS hint", h)
			}
		})
	}
	// a 504 the broker itself sent is not a refused certificate
	if h := connectHint(&amqp.Error{Code: amqp.ChannelError, Reason: "other", Server: true}, withCert); h != "" {
		t.Errorf("a broker's own 504: %q", h)
	}
}
