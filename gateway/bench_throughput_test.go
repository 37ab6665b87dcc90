package gateway_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

const (
	tpSenders = 4
	tpRound   = 2000 // messages per round: 500 per sender
)

// BenchmarkThroughputOneHost is issue 15's one-host throughput: 4 worker
// sessions each bridge_send 1 KiB replies to one primary that drains them
// with bridge_poll (default max) as fast as it can, fsync on; msgs/s is
// tpRound over the time until the primary has drained all of them. The
// baseline, measured on the same sessions in the same iteration, is the 4
// senders calling bridge_roster as fast as they can (roster-calls/s): the
// MCP floor, since a send is one call. Target: msgs/s ≥ 0.8× roster-calls/s.
// The -nosync variants run the same with --fsync=false: the gap between
// the two is what waiting for each publish's durable commit costs.
// One iteration is one round of each; ns/op is suppressed.
func BenchmarkThroughputOneHost(b *testing.B) {
	body := strings.Repeat("x", 1024)
	for _, tr := range []struct {
		name   string
		dial   dialer
		noSync bool
	}{
		{"http", gatewaytest.HTTPConn, false},
		{"stdio", gatewaytest.StdioConn, false},
		{"http-nosync", gatewaytest.HTTPConn, true},
		{"stdio-nosync", gatewaytest.StdioConn, true},
	} {
		b.Run(tr.name, func(b *testing.B) {
			g := startBenchGateway(b, tr.noSync)
			recv := tr.dial(b, g, "lead", "primary")
			senders := make([]*gatewaytest.Conn, tpSenders)
			for i := range senders {
				senders[i] = tr.dial(b, g, fmt.Sprintf("w%d", i), "worker")
			}
			tpRoundTrip(b, senders, recv, body, 4*tpSenders) // warm up: sessions, connections, first commits
			var sendDur, rosterDur time.Duration
			rounds := 0
			for b.Loop() {
				sendDur += tpRoundTrip(b, senders, recv, body, tpRound)
				rosterDur += tpRosters(b, senders, tpRound)
				rounds++
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(float64(rounds*tpRound)/sendDur.Seconds(), "msgs/s")
			b.ReportMetric(float64(rounds*tpRound)/rosterDur.Seconds(), "roster-calls/s")
		})
	}
}

// tpRoundTrip sends n messages from the senders to recv, which drains
// them concurrently, and returns the time until the last one is drained.
func tpRoundTrip(b *testing.B, senders []*gatewaytest.Conn, recv *gatewaytest.Conn, body string, n int) time.Duration {
	b.Helper()
	start := time.Now()
	errs := make(chan error, len(senders)+1)
	var wg sync.WaitGroup
	for _, s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n / len(senders) {
				if err := tpCall(s, "bridge_send", map[string]any{"target": "lead", "message": body}, "confirmed"); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for got := 0; got < n; {
			k, err := tpPoll(recv)
			if err != nil {
				errs <- fmt.Errorf("after %d of %d: %w", got, n, err)
				return
			}
			got += k
		}
	}()
	wg.Wait()
	d := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	return d
}

// tpRosters makes n bridge_roster calls spread over the senders.
func tpRosters(b *testing.B, senders []*gatewaytest.Conn, n int) time.Duration {
	b.Helper()
	start := time.Now()
	errs := make(chan error, len(senders))
	var wg sync.WaitGroup
	for _, s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n / len(senders) {
				if err := tpCall(s, "bridge_roster", nil, ""); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	d := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	return d
}

// tpCall is one tool call, safe off the benchmark's goroutine; want is the
// status it must return ("" for any).
func tpCall(cn *gatewaytest.Conn, tool string, args map[string]any, want string) error {
	_, err := tpRaw(cn, tool, args, want)
	return err
}

// tpPoll drains what the primary holds (waiting up to 5 s for the next).
func tpPoll(cn *gatewaytest.Conn) (int, error) {
	res, err := tpRaw(cn, "bridge_poll", map[string]any{"wait_s": 5}, "")
	if err != nil {
		return 0, err
	}
	s, n := gatewaytest.RawStatus(res)
	if s != "drained" || n == 0 {
		return 0, fmt.Errorf("poll: status %q, %d messages", s, n)
	}
	return n, nil
}

func tpRaw(cn *gatewaytest.Conn, tool string, args map[string]any, want string) (*mcpgo.CallToolResult, error) {
	req := mcpgo.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cn.Client.CallTool(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", cn.Name, tool, err)
	}
	if res.IsError {
		return nil, fmt.Errorf("%s: %s: tool error %+v", cn.Name, tool, res.Content)
	}
	if want != "" {
		if s, _ := gatewaytest.RawStatus(res); s != want {
			return nil, fmt.Errorf("%s: %s: status %q, want %q", cn.Name, tool, s, want)
		}
	}
	return res, nil
}
