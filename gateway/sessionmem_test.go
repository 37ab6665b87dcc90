package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// rawSession is a streamable HTTP client on the 2025-11-25 revision (the
// one with sessions and resumable streams), speaking plain HTTP so the
// test sees the SSE event ids and keeps nothing it reads.
type rawSession struct {
	t      testing.TB
	hc     *http.Client
	url    string
	token  string
	sid    string
	nextID int
}

const rawProtocol = "2025-11-25"

// post sends one JSON-RPC message and returns the response's content type,
// body and the SSE event ids in it.
func (s *rawSession) post(method string, params any, notification bool) (ctype string, body []byte, ids []string) {
	s.t.Helper()
	msg := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		msg["params"] = params
	}
	if !notification {
		s.nextID++
		msg["id"] = s.nextID
	}
	raw, _ := json.Marshal(msg)
	req, _ := http.NewRequest(http.MethodPost, s.url, bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", rawProtocol)
	if s.sid != "" {
		req.Header.Set("Mcp-Session-Id", s.sid)
	}
	res, err := s.hc.Do(req)
	if err != nil {
		s.t.Fatalf("%s: %v", method, err)
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		b, _ := io.ReadAll(res.Body)
		s.t.Fatalf("%s: %s %s", method, res.Status, b)
	}
	if sid := res.Header.Get("Mcp-Session-Id"); sid != "" {
		s.sid = sid
	}
	ctype = res.Header.Get("Content-Type")
	if !strings.HasPrefix(ctype, "text/event-stream") {
		body, _ = io.ReadAll(res.Body)
		return ctype, body, nil
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id:"):
			ids = append(ids, strings.TrimSpace(strings.TrimPrefix(line, "id:")))
		case strings.HasPrefix(line, "data:"):
			body = append(body, strings.TrimPrefix(line, "data:")...)
			body = append(body, '\n')
		}
	}
	if err := sc.Err(); err != nil {
		s.t.Fatalf("%s: reading the stream: %v", method, err)
	}
	return ctype, body, ids
}

// resume opens a GET resuming after event id and returns its status and
// (up to 4 KiB of) body.
func (s *rawSession) resume(id string) (int, string) {
	s.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.url, nil)
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("MCP-Protocol-Version", rawProtocol)
	req.Header.Set("Mcp-Session-Id", s.sid)
	req.Header.Set("Last-Event-ID", id)
	res, err := s.hc.Do(req)
	if err != nil {
		s.t.Fatalf("resume after %s: %v", id, err)
	}
	defer res.Body.Close()
	b := make([]byte, 4<<10)
	n, _ := io.ReadFull(res.Body, b)
	return res.StatusCode, string(b[:n])
}

func liveHeap() uint64 {
	var ms runtime.MemStats
	for range 3 {
		runtime.GC()
	}
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func rssBytes() uint64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// A long-lived streamable HTTP session, nudged before every call (mcp-go
// records the response of a call that carries a notification for
// resuming), polls 300 messages of
// 200 KB: the live heap grows by less than 32 MiB (mcp-go's own store kept
// every response: over 100 MiB), and resuming from an event the bounds
// dropped is refused with a 400 that says so. Heap, not RSS, is asserted
// on: the runtime returns freed memory to the system when it pleases.
func TestSessionMemoryStaysFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 60 MB through one session")
	}
	cfg := gatewaytest.LocalConfig(t, "")
	cfg.NoSync = true // memory, not durability, is measured here
	g := gatewaytest.Start(t, cfg)
	lead, tok := gatewaytest.Register(t, g, "lead", "primary")
	w := gatewaytest.RegisterOn(t, g, "w", bridge.RoleWorker)
	hc := &http.Client{Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()
	s := &rawSession{t: t, hc: hc, url: g.URL() + "/mcp", token: tok}
	s.post("initialize", map[string]any{"protocolVersion": rawProtocol, "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "memtest", "version": "1"}}, false)
	if s.sid == "" {
		t.Fatal("initialize gave no session id")
	}
	s.post("notifications/initialized", nil, true)

	filler := strings.Repeat("the quick brown fox jumps over the lazy dog. ", 200<<10/45)
	var firstID, lastID string
	sse := 0
	round := func(i int) {
		body := fmt.Sprintf("message %d: %s", i, filler)
		if _, err := g.Core().Send(context.Background(), w.GID, bridge.SendRequest{Target: "lead", Message: body}, nil); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		// a nudge queued before each poll: mcp-go answers the poll that
		// carries it as SSE and records its response in the event store
		g.MCPServer().Nudge(bridge.Entity{GID: lead, Name: "lead"}, bridge.HeldSummary{Total: 1})
		ctype, got, ids := s.post("tools/call", map[string]any{"name": "bridge_poll", "arguments": map[string]any{"wait_s": 10}}, false)
		if !bytes.Contains(got, []byte(fmt.Sprintf("message %d: the quick", i))) || len(got) < 200<<10 {
			t.Fatalf("poll %d: %d bytes (%s), without its message: %.300s", i, len(got), ctype, got)
		}
		if strings.HasPrefix(ctype, "text/event-stream") {
			sse++
		}
		if len(ids) > 0 {
			if firstID == "" {
				firstID = ids[0]
			}
			lastID = ids[len(ids)-1]
		}
	}
	// the figure: 300 polls, the heap growing by under 32 MiB. Under the
	// race detector (10x slower here) 100 polls, under a third of that:
	// still far under what a store keeping everything would grow (~0.4 MiB
	// a poll: each response carries the body twice, as text and as
	// structured content)
	const warm = 20
	polls, limit := 300, int64(32<<20)
	if raceEnabled {
		polls, limit = 100, 32<<20/3
	}
	for i := range warm {
		round(i)
	}
	heap0, rss0 := liveHeap(), rssBytes()
	for i := warm; i < warm+polls; i++ {
		round(i)
	}
	heap1, rss1 := liveHeap(), rssBytes()
	events, kept := g.MCPServer().ResumeEvents()
	growth := int64(heap1) - int64(heap0)
	t.Logf("%d polls of 200 KB (%d answered as SSE, so recorded for resuming): live heap %d → %d MiB (%+.1f MiB), RSS %d → %d MiB; the event store keeps %d events, %d KiB",
		polls, sse, heap0>>20, heap1>>20, float64(growth)/(1<<20), rss0>>20, rss1>>20, events, kept>>10)
	if sse < polls {
		t.Fatalf("only %d of %d polls were answered as SSE: the nudges did not make mcp-go record responses, so this test measures nothing", sse, polls)
	}
	if growth >= limit {
		t.Errorf("the live heap grew by %.1f MiB over %d polls, want < %.1f MiB", float64(growth)/(1<<20), polls, float64(limit)/(1<<20))
	}

	if code, body := s.resume(firstID); code != http.StatusBadRequest || !strings.Contains(body, "event_dropped") {
		t.Errorf("resuming after dropped event %s: %d %.300s; want 400 event_dropped", firstID, code, body)
	}
	if code, body := s.resume(lastID); code != http.StatusOK {
		t.Errorf("resuming after the last event %s: %d %.300s; want 200", lastID, code, body)
	}
	if _, err := gateway.Ask(g.StateDir(), gateway.Request{Op: "roster"}); err != nil {
		t.Fatal(err)
	}
}
