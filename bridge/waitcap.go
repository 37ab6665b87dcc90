package bridge

import (
	"context"
	"strconv"
	"time"
)

// DefaultMaxWait is Config.MaxWait's default: the cap of any blocking call.
const DefaultMaxWait = 45 * time.Second

type waitCapKey struct{}

// WithWaitCap bounds every wait of the calls made with ctx by d, under
// MaxWait: the MCP layer passes the ceiling of the client making the call
// (a client that cuts a call at 60 s must get pending before then).
// d <= 0 adds no bound.
func WithWaitCap(ctx context.Context, d time.Duration) context.Context {
	if d <= 0 {
		return ctx
	}
	return context.WithValue(ctx, waitCapKey{}, d)
}

// WaitCapFrom is the bound WithWaitCap put in ctx (0: none).
func WaitCapFrom(ctx context.Context) time.Duration {
	d, _ := ctx.Value(waitCapKey{}).(time.Duration)
	return d
}

// maxWait is the longest a call made with ctx may block: MaxWait, or less
// when its client's ceiling is lower.
func (c *Core) maxWait(ctx context.Context) time.Duration {
	if d, ok := ctx.Value(waitCapKey{}).(time.Duration); ok && d < c.cfg.MaxWait {
		return d
	}
	return c.cfg.MaxWait
}

// capWait bounds a wait by maxWait.
func (c *Core) capWait(ctx context.Context, d time.Duration) time.Duration {
	return min(d, c.maxWait(ctx))
}

// waitArg is a wait as a next step names it ("wait_s=45").
func waitArg(d time.Duration) string {
	return "wait_s=" + strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}
