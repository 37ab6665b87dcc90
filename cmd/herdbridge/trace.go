package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/cliout"
	"github.com/herdbridge/herdbridge/gateway"
)

// traceMaxWait caps --wait below the admin socket's 30 s reply deadline.
const traceMaxWait = 20 * time.Second

func traceCommand(stdout io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:   "trace TRACE_ID|MSG_ID [--wait 5s] [--json]",
		Short: "List the hops of one conversation on every host, in time order",
		Long: `List the hops of one conversation (a traceId) or of one message and its receipts
and reply (a msgId): publish, accept or refuse, hold, queue, inject, drain, expire,
dead letter — from this host's audit log and from every other host in presence,
asked over the control plane (metadata only, never a body). A host that does not
answer within --wait is listed as such. Times are each host's own clock.`,
		Example: "  herdbridge trace 3f1a0c9e-5b6d-4e7f-8a9b-0c1d2e3f4a5b\n  herdbridge trace 3f1a0c9e-5b6d-4e7f-8a9b-0c1d2e3f4a5b --json",
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return &usageError{err: fmt.Errorf("trace: want one traceId or msgId, got %d arguments", len(args)), line: c.UseLine(), path: c.CommandPath()}
			}
			return nil
		},
	}
	fs, dir := newFlags(c)
	asJSON := fs.Bool("json", false, "print JSON")
	wait := fs.Duration("wait", bridge.TraceWait, "how long to wait for the other hosts' answers (at most 20s)")
	c.RunE = func(_ *cobra.Command, args []string) error {
		if *wait <= 0 || *wait > traceMaxWait {
			return &usageError{err: fmt.Errorf("trace: --wait %v is out of range (above 0, at most %v)", *wait, traceMaxWait), line: c.UseLine(), path: c.CommandPath()}
		}
		r, err := gateway.Ask(*dir, gateway.Request{Op: "trace", ID: args[0], WaitMs: wait.Milliseconds()})
		if err != nil {
			return err
		}
		if r.Trace == nil {
			return errors.New("trace: the gateway sent none (an older gateway? restart it)")
		}
		if *asJSON {
			if err := json.NewEncoder(stdout).Encode(cliout.TraceJSON(r.Trace)); err != nil {
				return err
			}
		} else {
			cliout.Trace(stdout, r.Trace)
		}
		return r.Trace.NotFound()
	}
	return c
}
