package broker

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	amqp "github.com/rabbitmq/amqp091-go"
)

// checkTLS refuses TLS options with a plain amqp:// URL: the operator asked
// for TLS, and amqp091-go would silently connect in clear.
func checkTLS(opts Options) error {
	if opts.TLS != nil && !strings.HasPrefix(opts.URL, "amqps://") {
		return fmt.Errorf("broker: TLS options (--broker-ca/--broker-cert/--broker-key) given, but %s is not amqps://: use amqps:// (the broker's TLS port, 5671 by default)", redact(opts.URL))
	}
	return nil
}

// connectHint names what to do about a failed dial, for the TLS failures
// an operator meets when setting up amqps:// ("" when there is nothing to
// add).
func connectHint(err error, conf *tls.Config) string {
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	var record tls.RecordHeaderError
	msg := err.Error()
	noClientCert := conf == nil || len(conf.Certificates) == 0 && conf.GetClientCertificate == nil
	reset := conf != nil && closedAfterHandshake(err)
	switch {
	case errors.As(err, &unknown):
		return ": the broker's certificate is signed by an authority this gateway does not trust: pass --broker-ca with the CA that signed it"
	case errors.As(err, &host):
		return ": the broker's certificate is not valid for the host name of the URL: connect with a name (or IP) the certificate lists"
	case errors.As(err, &invalid):
		return ": the broker's certificate is not valid (expired, or not yet valid: check it and this host's clock)"
	case errors.As(err, &record):
		return ": that port does not speak TLS: use the broker's TLS port (5671 by default) with amqps://, or amqp:// for a plain port"
	case strings.Contains(msg, "tls: certificate required"),
		noClientCert && (reset || strings.Contains(msg, "tls: handshake failure") || strings.Contains(msg, "tls: bad certificate")):
		return ": the broker requires a client certificate: pass --broker-cert and --broker-key"
	case strings.Contains(msg, "tls: bad certificate"), strings.Contains(msg, "tls: unknown certificate authority"),
		strings.Contains(msg, "tls: unknown certificate"):
		return ": the broker refused this gateway's client certificate (is it signed by a CA the broker's cacertfile lists?)"
	case reset:
		return ": the broker closed the connection right after the TLS handshake: it likely refused this gateway's client certificate (is it signed by a CA the broker's cacertfile lists?)"
	}
	return ""
}

// closedAfterHandshake reports whether err is the broker closing the
// connection while the AMQP handshake runs. With TLS 1.3 the broker judges
// the client certificate after the client's side of the TLS handshake is
// done, so a refused certificate reaches the client in whichever form its
// next step meets: the alert itself (matched by text in connectHint), a
// reset or EOF on the first write or read, "use of closed network
// connection" once amqp091-go's reader has shut the socket, or
// amqp091-go's ErrClosed (Exception 504 "channel/connection is not open")
// when the handshake call finds the connection already torn down. All of
// them mean the same thing to the operator.
func closedAfterHandshake(err error) bool {
	var ae *amqp.Error
	switch {
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return true
	case errors.As(err, &ae) && ae.Code == amqp.ChannelError && !ae.Server:
		return true // amqp.ErrClosed, raised by the client library, not sent by the broker
	}
	msg := err.Error()
	return strings.Contains(msg, "connection reset") || strings.Contains(msg, "broken pipe") ||
		strings.Contains(msg, "use of closed network connection") || strings.Contains(msg, "channel/connection is not open")
}

// permissionRefused tells a 403 for missing permissions (RabbitMQ:
// "access to queue 'q' in vhost '/' refused for user 'u'") from one for
// an exclusive consumer or queue held by another connection.
func permissionRefused(ae *amqp.Error) bool {
	r := strings.ToLower(ae.Reason)
	return strings.Contains(r, "refused for user") || strings.Contains(r, "permission")
}

// accessErr is a 403 on what (e.g. "declare queue") of name, refused for
// lack of permissions: it says so and what to check.
func accessErr(what, name string, ae *amqp.Error) error {
	return fmt.Errorf("broker: %s %s: access refused: the broker user of this gateway lacks the permission (%w): a gateway may use only its own host's control.<host> and roster.<host> queues — check --host-id and the login in the broker URL; give each host its own user (`herdbridge broker-user --host-id HOST`)", what, name, ae)
}
