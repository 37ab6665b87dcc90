// Package opsui is the operator page a gateway serves at /ui: a read-only,
// live view of the fabric for the person running it — hosts, entities,
// a feed of traffic metadata, dead letters and refusals.
//
// It owns the page's embedded assets (plain HTML, CSS and JS, no build
// step, nothing fetched from elsewhere), the live feed (a bridge.Observer
// with a bounded ring that any number of browser tabs read without
// growing the gateway's memory), the one-time login links and the
// operator sessions they start, and the HTTP handlers. It reads the core
// only through Source (Roster, DeadLetters, Refused) and never sees a
// message body: bridge.Event carries none. The gateway wires it: it owns
// the operator check (which cookie counts), the admin-socket op that mints
// a login link, and the listener. opsui must not import gateway, mcp,
// herdr or keys.
package opsui
