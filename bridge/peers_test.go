package bridge

import (
	"fmt"
	"testing"
	"time"
)

// FuzzPresenceBody: any heartbeat body, trust list included, decodes or is
// refused without a panic; a decoded _gateway entry's trust list is read
// without one, and says yes only when it names this host's key.
func FuzzPresenceBody(f *testing.F) {
	f.Add([]byte(`{"gid":"`+GatewayGID("b")+`","name":"_gateway","host":"b","key":"SHA256:kb","trusts":{"a":["SHA256:ka"],"b":["SHA256:kb"]}}`), "b")
	f.Add([]byte(`{"gid":"`+GatewayGID("b")+`","name":"_gateway","host":"b","trusts":{"a":[]}}`), "b")
	f.Add([]byte(`{"gid":"`+GatewayGID("b")+`","name":"_gateway","host":"b","trusts":null}`), "b")
	f.Add([]byte(`{"name":"_gateway","host":"b","trusts":["a"]}`), "b")
	c := &Core{cfg: Config{Host: "a", KeyFingerprint: "SHA256:ka"}}
	f.Fuzz(func(t *testing.T, body []byte, host string) {
		env := &Envelope{Host: host, From: GatewayGID(host), Body: body}
		p, err := presenceBody(env)
		if err != nil {
			return
		}
		if p.Host != host {
			t.Fatalf("accepted a body of host %q on an envelope of %q", p.Host, host)
		}
		ps := &peerState{beat: time.Now()}
		ps.gateway(p)
		v, why := c.trustsUs(host, ps)
		named := false
		for _, fp := range p.Trusts["a"] {
			named = named || fp == "SHA256:ka"
		}
		switch {
		case p.Trusts == nil && v != TrustUnknown:
			t.Fatalf("no trust list read as %q", v)
		case p.Trusts != nil && (v == TrustYes) != named:
			t.Fatalf("trust list %v read as %q (%s)", p.Trusts, v, why)
		}
	})
}

// TestStrangersCapped: hosts heard only in refused heartbeats are
// remembered up to maxStrangers (anyone on the roster exchange can invent
// host ids), and forgotten after the TTL.
func TestStrangersCapped(t *testing.T) {
	p := newPresence()
	now := time.Now()
	for i := 0; i < 10*maxStrangers; i++ {
		p.noteStranger(fmt.Sprintf("h%d", i), "SHA256:x", now)
	}
	if len(p.strangers) != maxStrangers {
		t.Fatalf("%d strangers remembered, want %d", len(p.strangers), maxStrangers)
	}
	p.heard = now.Add(time.Minute) // hearing itself: expiry runs
	p.expire(now.Add(time.Minute), time.Second, 10*time.Second, 0)
	if len(p.strangers) != 0 {
		t.Fatalf("%d strangers after their TTL", len(p.strangers))
	}
}
