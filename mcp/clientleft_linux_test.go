package mcp

import (
	"net"
	"testing"
	"time"
)

// TestClientClosedReadsTheSocket: the check does not wait for net/http to
// read the peer's EOF (a stalled gateway has not yet): the socket says so
// as soon as the FIN is in, even with bytes still unread before it.
func TestClientClosedReadsTheSocket(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	ours, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer ours.Close()
	if _, err := peer.Write([]byte("unread close_notify")); err != nil {
		t.Fatal(err)
	}
	if clientClosed(ours) {
		t.Fatal("an open connection reads as closed")
	}
	peer.Close()
	deadline := time.Now().Add(5 * time.Second)
	for !clientClosed(ours) {
		if time.Now().After(deadline) {
			t.Fatal("the peer's close was never seen on the socket")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
