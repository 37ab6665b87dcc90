package mcp

import (
	"context"

	"github.com/herdbridge/herdbridge/bridge"
)

// Fabric is what the tool handlers call of the bridge core: one method per
// tool. *bridge.Core implements it; it is an interface, and the narrowest
// one, so that the handlers (argument decoding, error sentences, result
// shapes) can be tested against a fake without a core or a gateway
// (tools_test.go). The rest of the server (sessions, tokens, the inbox
// resource) still holds the core itself.
type Fabric interface {
	Send(ctx context.Context, gid string, req bridge.SendRequest, prog bridge.Progress) (*bridge.Result, error)
	Ask(ctx context.Context, gid string, req bridge.AskRequest, prog bridge.Progress) (*bridge.Result, error)
	Poll(ctx context.Context, gid string, req bridge.PollRequest, prog bridge.Progress) (*bridge.Result, error)
	Broadcast(ctx context.Context, gid string, req bridge.BroadcastRequest) (*bridge.Result, error)
	Roster() bridge.RosterView
	Circle(gid string) bridge.Circle
	Spawn(ctx context.Context, caller string, req bridge.SpawnRequest) (*bridge.Result, error)
	History(ctx context.Context, gid string, req bridge.HistoryRequest) (*bridge.Result, error)
	Stop(ctx context.Context, caller string, req bridge.StopRequest) (*bridge.Result, error)
	Interrupt(ctx context.Context, caller string, req bridge.InterruptRequest, prog bridge.Progress) (*bridge.Result, error)
}

var _ Fabric = (*bridge.Core)(nil)
