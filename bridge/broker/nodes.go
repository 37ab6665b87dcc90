package broker

import (
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// A broker may be several nodes (a cluster, or a standby): the transport
// holds one connection to one of them and moves to another when it is
// lost. Each round dials the nodes in a shuffled order — gateways spread
// over the nodes instead of all piling onto the first — a failed node
// handing over to the next at once; only after every node of a round failed
// does it back off, with full jitter, so gateways that lost the same node
// do not come back in step.

// maxRoundBackoff caps the wait between two failed rounds of dials.
const maxRoundBackoff = 5 * time.Second

// ParseURLs splits broker URIs given as comma lists (a flag repeated, an
// environment variable, a configuration list) into one list, blanks
// dropped, duplicates kept once.
func ParseURLs(lists ...string) []string {
	var out []string
	seen := map[string]bool{}
	for _, l := range lists {
		for _, u := range strings.Split(l, ",") {
			if u = strings.TrimSpace(u); u != "" && !seen[u] {
				seen[u] = true
				out = append(out, u)
			}
		}
	}
	return out
}

// nodeURLs is the configured node list: URLs, else the one URL.
func nodeURLs(opts Options) []string {
	if len(opts.URLs) > 0 {
		return ParseURLs(opts.URLs...)
	}
	return ParseURLs(opts.URL)
}

// CheckURLs validates every URI up front: a node that cannot be dialled
// because its URI is wrong is a configuration error, not a node that is
// down. The error names the bad URI, its credentials redacted.
func CheckURLs(urls []string, tlsConf *tls.Config) error {
	if len(urls) == 0 {
		return errors.New("broker: no broker URI given")
	}
	for _, u := range urls {
		if !strings.HasPrefix(u, "amqp://") && !strings.HasPrefix(u, "amqps://") {
			return fmt.Errorf("broker: %s: use an amqp:// or amqps:// URI", redact(u))
		}
		if _, err := amqp.ParseURI(u); err != nil {
			return fmt.Errorf("broker: %s: %v", redact(u), redactErr(err, u))
		}
		if err := checkTLS(Options{URL: u, TLS: tlsConf}); err != nil {
			return err
		}
	}
	return nil
}

// redactErr keeps a URI's password out of a parse error that quotes it.
func redactErr(err error, u string) string {
	return strings.ReplaceAll(err.Error(), u, redact(u))
}

// nodeName is a URI's host:port, no credentials: what stats, doctor and
// the metrics call the node.
func nodeName(u string) string {
	uri, err := amqp.ParseURI(u)
	if err != nil {
		return redact(u)
	}
	return net.JoinHostPort(uri.Host, fmt.Sprint(uri.Port))
}

// nodeTLS is the TLS configuration for one dial: a clone (amqp091-go
// writes the server name into the config it is given), its ServerName the
// node's host when there are several nodes — one certificate name cannot
// fit them all — and the configured one when there is one.
func nodeTLS(conf *tls.Config, u string, nodes int) *tls.Config {
	if conf == nil {
		return nil
	}
	c := conf.Clone()
	if nodes > 1 {
		c.ServerName = ""
		if uri, err := amqp.ParseURI(u); err == nil {
			c.ServerName = uri.Host
		}
	}
	return c
}

// dialOrder is the order of one round: shuffled, and after a loss the
// node just lost last, so a connection that failed moves to another node
// when there is one (it is still tried, last: it may be the only one up).
func dialOrder(urls []string, last string, shuffle bool) []string {
	order := append([]string(nil), urls...)
	if shuffle {
		rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	for i, u := range order {
		if u == last && len(order) > 1 {
			order = append(append(order[:i:i], order[i+1:]...), u)
			break
		}
	}
	return order
}

// roundBackoff is the wait after the failed round number round (0-based):
// full jitter, uniform in [0, min(cap, 100ms·2^round)].
func roundBackoff(round int) time.Duration {
	ceil := maxRoundBackoff
	if round < 6 {
		ceil = min(100*time.Millisecond<<round, maxRoundBackoff)
	}
	return time.Duration(rand.Int64N(int64(ceil)) + 1)
}

// Link is which broker node the transport is connected to, for stats,
// doctor and the operator page: names only (host:port), no credentials.
type Link struct {
	Connected   bool     `json:"connected"`
	Node        string   `json:"node,omitempty"` // connected to, or last connected to when down
	ClusterName string   `json:"clusterName,omitempty"`
	Nodes       []string `json:"nodes"` // every configured node, in the order configured
	// ClusterMismatch says that the transport reconnected to a node of
	// another cluster than the one it first connected to (clustercheck.go);
	// it stays until the gateway restarts.
	ClusterMismatch string `json:"clusterMismatch,omitempty"`
}

// Link reads the link now.
func (t *Transport) Link() Link {
	s := t.Server()
	t.mu.Lock()
	mismatch := t.clusterMismatch
	t.mu.Unlock()
	l := Link{Connected: t.Connected(), Node: s.Node, ClusterName: s.ClusterName, Nodes: make([]string, len(t.urls)), ClusterMismatch: mismatch}
	for i, u := range t.urls {
		l.Nodes[i] = nodeName(u)
	}
	return l
}

// Describe is the link in words: "node H:P of N (cluster C)".
func (l Link) Describe() string {
	s := l.Node
	if len(l.Nodes) > 1 {
		s += fmt.Sprintf(" (one of %d nodes: %s)", len(l.Nodes), strings.Join(l.Nodes, ", "))
	}
	if l.ClusterName != "" {
		s += ", cluster " + l.ClusterName
	}
	return s
}
