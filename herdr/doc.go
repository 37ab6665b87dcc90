// Package herdr will own the client of herdr's socket API and the forward
// path into worker panes: it implements bridge.Injector, which the bridge
// core already calls (ack first, then inject, then INJECTED or FAILED to the
// sender). It arrives with the herdr work.
package herdr
