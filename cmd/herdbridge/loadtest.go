package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/herdbridge/herdbridge/loadtest"
)

// errLoadFailed: the run finished, and its report shows errors or lost
// messages (exit status 1; the report says which).
var errLoadFailed = errors.New("loadtest: errors or lost messages (see the report)")

func loadtestCommand(stdout, stderr io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:   "loadtest [--primaries N] [--workers M] [--duration D] [--in-process] [--json]",
		Short: "Drive agents over MCP against a gateway and report throughput, latency per kind, errors and the gateway's cost",
		Long: `Drive N primaries and M pull workers over the real MCP transports (streamable HTTP, and
the stdio relay: a ` + "`herdbridge mcp`" + ` child per agent) against the gateway running on the
state dir, or with --in-process against a throwaway embedded gateway in a temp dir.

Each primary, --rate times a second, briefs a worker (70%), broadcasts to a team (a group of
up to 10 workers: 8%) or polls filtered on one worker (22%), and answers every ask; each
worker replies to every brief and asks a primary; every agent long-polls its inbox. Every
message carries a tag, so each is accounted for exactly. After --duration the traffic stops,
outstanding deliveries are awaited (--drain), then the report: calls, errors, rate, and call
and delivery p50/p90/p99 per kind; messages accepted, owed, delivered and lost; the gateway's
peak RSS and goroutines and its CPU time over the run. Progress goes to stderr.

Entities (and teams) are named lt-<run id>-…, so neither real agents nor a second run meet
them; everything the run registered is removed at its end, also on Ctrl-C. Exit status 1 if
any call failed or any message was lost.`,
		Example: `  herdbridge loadtest                                      # 10+10 agents for 30s on this host's gateway
  herdbridge loadtest --in-process --primaries 100 --workers 100 --register 1000
  herdbridge loadtest --transport stdio --rate 5 --duration 1m --json > load.json`,
		Args: noArgs,
	}
	fs, dir := newFlags(c)
	primaries := fs.Int("primaries", 10, "primaries (over streamable HTTP, or the stdio relay with --transport stdio)")
	workers := fs.Int("workers", 10, "pull workers (alternating streamable HTTP and the stdio relay with --transport mixed)")
	duration := fs.Duration("duration", 30*time.Second, "how long the traffic runs")
	rate := fs.Float64("rate", 1, "actions (brief, broadcast, filtered poll) per primary per second; each worker asks a primary every 8/rate seconds")
	register := fs.Int("register", 0, "pre-register this many idle entities, then time --roster-calls bridge_roster calls before the traffic")
	rosterCalls := fs.Int("roster-calls", 50, "bridge_roster calls timed with --register")
	transport := fs.String("transport", "mixed", "http, stdio, or mixed (primaries over HTTP, workers alternating HTTP and stdio)")
	inProcess := fs.Bool("in-process", false, "start a throwaway embedded gateway in a temp state dir (no broker) instead of using the running one")
	drain := fs.Duration("drain", 30*time.Second, "after the traffic, how long to await outstanding deliveries")
	asJSON := fs.Bool("json", false, "print the report as one JSON object")
	c.RunE = func(c *cobra.Command, _ []string) error {
		bad := func(format string, args ...any) error {
			return &usageError{err: fmt.Errorf(format, args...), line: c.UseLine(), path: c.CommandPath()}
		}
		switch {
		case *primaries < 1 || *workers < 1:
			return bad("loadtest needs --primaries and --workers of at least 1")
		case *duration <= 0 || *drain < 0:
			return bad("--duration must be above 0 and --drain at least 0")
		case !(*rate > 0) || *rate > 1000:
			return bad("--rate must be above 0 and at most 1000 actions a second")
		case *register < 0 || *rosterCalls < 1:
			return bad("--register must be at least 0 and --roster-calls at least 1")
		case *transport != "http" && *transport != "stdio" && *transport != "mixed":
			return bad("--transport %q: use http, stdio or mixed", *transport)
		}
		bin, err := os.Executable()
		if err != nil {
			return fmt.Errorf("loadtest: finding this binary for the stdio relay: %w", err)
		}
		rep, err := loadtest.RunTool(c.Context(), loadtest.ToolOptions{Bin: bin, StateDir: *dir, InProcess: *inProcess,
			Primaries: *primaries, Workers: *workers, Transport: loadtest.Transport(*transport), Duration: *duration, Rate: *rate,
			Register: *register, RosterCalls: *rosterCalls, DrainWithin: *drain, Progress: stderr, ProgressEvery: 5 * time.Second,
			Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
		if rep != nil {
			if *asJSON {
				if jerr := json.NewEncoder(stdout).Encode(rep); jerr != nil {
					return errors.Join(err, jerr)
				}
			} else {
				rep.WriteTable(stdout)
			}
		}
		if err == nil && !rep.OK() {
			err = errLoadFailed
		}
		return err
	}
	return c
}
