package brokertest

import (
	"net"
	"net/url"
	"sync"
	"testing"
)

// Proxy relays TCP between AMQP clients and the test broker, for fault
// tests that need the broker's side of a link held back or the link cut at
// an exact moment — between a publish and its confirm — which stopping the
// broker cannot do. The broker stays real; only the wire is in the test's
// hands.
type Proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cond   *sync.Cond
	held   bool
	links  map[*link]bool
	wg     sync.WaitGroup
	closed bool
}

// link is one relayed connection.
type link struct {
	client, broker net.Conn
	cut            bool
}

// NewProxy starts a proxy in front of the broker at brokerURL and returns
// it with the URL that reaches the broker through it. It stops with the
// test.
func NewProxy(t testing.TB, brokerURL string) (*Proxy, string) {
	t.Helper()
	u, err := url.Parse(brokerURL)
	if err != nil {
		t.Fatalf("proxy: broker URL: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy: listen: %v", err)
	}
	p := &Proxy{ln: ln, target: u.Host, links: map[*link]bool{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	u.Host = ln.Addr().String()
	return p, u.String()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		b, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		l := &link{client: c, broker: b}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			b.Close()
			return
		}
		p.links[l] = true
		p.mu.Unlock()
		p.wg.Add(2)
		go p.relay(l, c, b, false)
		go p.relay(l, b, c, true)
	}
}

// relay copies from src to dst; fromBroker bytes wait while the proxy holds.
func (p *Proxy) relay(l *link, src, dst net.Conn, fromBroker bool) {
	defer p.wg.Done()
	defer p.cutLink(l)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && fromBroker && !p.waitReleased(l) {
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or cut: the other direction ends with it
		}
	}
}

// waitReleased blocks while the proxy holds; false when l was cut meanwhile.
func (p *Proxy) waitReleased(l *link) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.held && !l.cut {
		p.cond.Wait()
	}
	return !l.cut
}

// Hold stops relaying what the broker sends (confirms, returns,
// deliveries, heartbeats) until Release; it is kept, not dropped. What
// clients send still reaches the broker.
func (p *Proxy) Hold() {
	p.mu.Lock()
	p.held = true
	p.mu.Unlock()
}

// Release relays again, the held bytes first.
func (p *Proxy) Release() {
	p.mu.Lock()
	p.held = false
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Cut closes every relayed connection now, as a network failure would:
// held bytes are lost. New connections are relayed (held, if holding).
func (p *Proxy) Cut() {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		p.cutLink(l)
	}
}

func (p *Proxy) cutLink(l *link) {
	p.mu.Lock()
	l.cut = true
	delete(p.links, l)
	p.cond.Broadcast()
	p.mu.Unlock()
	l.client.Close()
	l.broker.Close()
}

// Stop kills the proxy, as the death of the node behind it would: every
// relayed connection is cut and no new one is accepted.
func (p *Proxy) Stop() { p.close() }

func (p *Proxy) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.Cut()
	p.wg.Wait()
}
