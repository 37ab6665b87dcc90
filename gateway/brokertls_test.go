package gateway_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/herdbridge/herdbridge/bridge/broker/brokertest"
	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// brokerPKI is a throwaway CA with a broker certificate (127.0.0.1,
// localhost) and a gateway client certificate, as PEM files in dir.
type brokerPKI struct {
	ca, serverCert, serverKey, clientCert, clientKey string
	pool                                             *x509.CertPool
}

func newBrokerPKI(t testing.TB, dir string) brokerPKI {
	t.Helper()
	now := time.Now()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	writeKey := func(name string, k *ecdsa.PrivateKey) string {
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return write(name, "EC PRIVATE KEY", der)
	}
	caKey := newKey()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "herdbridge test broker CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, k *ecdsa.PrivateKey) []byte {
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
		if usage == x509.ExtKeyUsageServerAuth {
			tmpl.DNSNames, tmpl.IPAddresses = []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, k.Public(), caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	sk, ck := newKey(), newKey()
	p := brokerPKI{
		ca:         write("ca.pem", "CERTIFICATE", caDER),
		serverCert: write("server.pem", "CERTIFICATE", leaf(2, "localhost", x509.ExtKeyUsageServerAuth, sk)),
		serverKey:  writeKey("server.key", sk),
		clientCert: write("client.pem", "CERTIFICATE", leaf(3, "herdbridge gateway", x509.ExtKeyUsageClientAuth, ck)),
		clientKey:  writeKey("client.key", ck),
		pool:       x509.NewCertPool(),
	}
	p.pool.AddCert(ca)
	return p
}

// freeLoopbackPort is a TCP port on 127.0.0.1 that was free a moment ago.
func freeLoopbackPort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestBrokerTLS: a private broker with only verified-peer TLS
// (verify_peer, fail_if_no_peer_cert) besides its plain test port.
// Gateways on amqps:// with --broker-ca/--broker-cert/--broker-key
// exchange a message; without --broker-ca the start fails naming the
// unknown authority; without a client certificate, or with one of another
// CA, the broker refuses it;
// TLS flags with amqp:// are refused rather than ignored.
func TestBrokerTLS(t *testing.T) {
	pki := newBrokerPKI(t, gatewaytest.TempDir(t))
	port := freeLoopbackPort(t)
	b := brokertest.StartPrivateConf(t, strings.Join([]string{
		fmt.Sprintf("listeners.ssl.default = 127.0.0.1:%d", port),
		"ssl_options.cacertfile = " + pki.ca,
		"ssl_options.certfile = " + pki.serverCert,
		"ssl_options.keyfile = " + pki.serverKey,
		"ssl_options.verify = verify_peer",
		"ssl_options.fail_if_no_peer_cert = true",
	}, "\n"))
	t.Cleanup(func() { // runs before the broker stops: its log is still there
		if t.Failed() {
			t.Logf("broker log:\n%s", b.LogTail(30))
		}
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	gatewaytest.Eventually(t, 30*time.Second, "the broker's TLS listener on "+addr, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	url := "amqps://guest:guest@" + addr + "/"
	full := &tls.Config{RootCAs: pki.pool, MinVersion: tls.VersionTLS12}
	cert, err := tls.LoadX509KeyPair(pki.clientCert, pki.clientKey)
	if err != nil {
		t.Fatal(err)
	}
	full.Certificates = []tls.Certificate{cert}
	conn, err := amqp.DialConfig(url, amqp.Config{TLSClientConfig: full})
	if err != nil {
		t.Fatalf("raw amqps client: %v", err)
	}
	st := conn.ConnectionState()
	t.Logf("broker TLS listener %s: %s, broker certificate %q issued by %q", addr, tls.VersionName(st.Version),
		st.PeerCertificates[0].Subject.CommonName, st.PeerCertificates[0].Issuer.CommonName)
	conn.Close()

	t.Run("message crosses", func(t *testing.T) {
		var gs []*gateway.Gateway
		for _, h := range []string{gatewaytest.UniqueHost("tlsa"), gatewaytest.UniqueHost("tlsb")} {
			cfg := gatewaytest.HostConfig(t, h, url)
			cfg.BrokerCA, cfg.BrokerCert, cfg.BrokerKey = pki.ca, pki.clientCert, pki.clientKey
			gatewaytest.JoinTrustMesh(t, cfg.StateDir, h)
			gs = append(gs, gatewaytest.Start(t, cfg))
		}
		gatewaytest.CrossHostSend(t, gs[0], gs[1], "w", "lead", "across amqps://")
		t.Logf("two gateways on amqps://%s with --broker-ca/--broker-cert/--broker-key: a message crossed", addr)
	})

	refused := func(t *testing.T, cfg gateway.Config, wants ...string) {
		t.Helper()
		g, err := gateway.Open(context.Background(), cfg)
		if err == nil {
			g.Close()
			t.Fatal("started")
		}
		for _, w := range wants {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("error lacks %q: %v", w, err)
			}
		}
		t.Logf("refused: %v", err)
	}
	t.Run("without --broker-ca", func(t *testing.T) {
		cfg := gatewaytest.HostConfig(t, gatewaytest.UniqueHost("tlsnoca"), url)
		cfg.BrokerCert, cfg.BrokerKey = pki.clientCert, pki.clientKey
		refused(t, cfg, "certificate signed by unknown authority", "--broker-ca")
	})
	t.Run("without a client certificate", func(t *testing.T) {
		cfg := gatewaytest.HostConfig(t, gatewaytest.UniqueHost("tlsnocert"), url)
		cfg.BrokerCA = pki.ca
		// Under TLS 1.3 the refusal reaches the gateway as the alert, a
		// reset, a closed connection or amqp091-go's 504, depending on
		// timing: whichever, the start fails and says what to check.
		refused(t, cfg, "client certificate", "--broker-cert", "--broker-key")
	})
	t.Run("client certificate of another CA", func(t *testing.T) {
		other := newBrokerPKI(t, gatewaytest.TempDir(t))
		cfg := gatewaytest.HostConfig(t, gatewaytest.UniqueHost("tlsforeign"), url)
		cfg.BrokerCA, cfg.BrokerCert, cfg.BrokerKey = pki.ca, other.clientCert, other.clientKey
		refused(t, cfg, "client certificate", "signed by a CA the broker's cacertfile lists") // any form of the refusal, as above
	})
	t.Run("TLS flags with amqp://", func(t *testing.T) {
		cfg := gatewaytest.HostConfig(t, gatewaytest.UniqueHost("tlsplain"), b.URL)
		cfg.BrokerCA = pki.ca
		refused(t, cfg, "use amqps://")
	})
}
