package gateway

import "net"

// OpenConns is how many connections the HTTP listener and the admin
// socket hold open now (tests only).
func (g *Gateway) OpenConns() (http, socket int) {
	return len(unwrapSteady(g.ln).sem), len(unwrapSteady(g.sock).sem)
}

func unwrapSteady(ln net.Listener) *steadyListener {
	if s, ok := ln.(*steadyListener); ok {
		return s
	}
	return &steadyListener{}
}
