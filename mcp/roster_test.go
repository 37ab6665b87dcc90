package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/embedded"
	bstore "github.com/herdbridge/herdbridge/bridge/store"
)

// fleet is a roster of hosts × per entities as a large fabric has them:
// every field a gateway fills, set; the caller a primary on the first host
// whose team and recent peers are full (the summary's worst case).
func fleet(hosts, per int) (bridge.RosterView, bridge.Circle) {
	now := time.Date(2026, 12, 2, 13, 0, 0, 0, time.UTC)
	v := bridge.RosterView{}
	ci := bridge.Circle{Lead: caller}
	for h := range hosts {
		host := fmt.Sprintf("build-host-%02d", h)
		hb := now
		v.Hosts = append(v.Hosts, bridge.HostView{Host: host, Local: h == 0, Profiles: []string{"coder", "reviewer", "tester"},
			Key: "SHA256:" + strings.Repeat("k", 43), Trust: bridge.TrustBoth, LastHeartbeat: &hb, Seal: "sealed"})
		for i := range per {
			e := bridge.EntityView{Entity: bridge.Entity{GID: fmt.Sprintf("0b6c3a52-%04d-4e7e-9f00-%012d", h, i), Name: fmt.Sprintf("coder-%02d-%03d", h, i),
				Host: host, Role: bridge.RoleWorker, Groups: []string{"backend", fmt.Sprintf("team-%d", i%5)}, PaneID: fmt.Sprintf("w%d:p%d", h, i),
				Registered: now, Spawned: true, Profile: "coder"}, Held: i % 3, Sessions: 1, Status: []string{"idle", "working", "blocked", "done"}[i%4]}
			if i == 0 {
				e.GID, e.Name, e.Role, e.Spawned, e.Profile = fmt.Sprintf("0b6c3a52-%04d-4e7e-9f00-lead", h), fmt.Sprintf("lead-%02d", h), bridge.RolePrimary, false, ""
				if h == 0 {
					e.GID = caller
				}
			} else if i%7 == 0 {
				seen := now
				e.Sessions, e.Status, e.LastSeen = 0, "detached", &seen
			}
			v.Entities = append(v.Entities, e)
			if e.GID != caller && len(ci.Recent) < 20 {
				ci.Recent = append(ci.Recent, e.GID)
			}
			if h < 2 && e.Role == bridge.RoleWorker {
				ci.Team = append(ci.Team, e.GID)
			}
		}
	}
	return v, ci
}

// call is one bridge_roster call over f: its text, its structuredContent
// (as JSON), the result.
func rosterCall(t testing.TB, f *fakeFabric, args string) (string, []byte, *mcpgo.CallToolResult) {
	t.Helper()
	s := New(nil, nil)
	s.fab = f
	req := mcpgo.CallToolRequest{}
	req.Params.Name, req.Params.RawArguments = "bridge_roster", json.RawMessage(args)
	r, err := s.rosterTool().Handler(WithEntity(context.Background(), caller), req)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(r.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	return resultText(r), raw, r
}

// TestRosterFitsItsBudget: with 1,000 entities on 50 hosts, the default
// result — and every page of the whole list — is at most 16 KB of text
// and structuredContent together, and the pages list every entity once.
func TestRosterFitsItsBudget(t *testing.T) {
	v, ci := fleet(50, 20)
	f := &fakeFabric{roster: v, circle: ci}
	text, raw, r := rosterCall(t, f, `{}`)
	t.Logf("default result, 1,000 entities: text %d B + structuredContent %d B = %d B", len(text), len(raw), len(text)+len(raw))
	if r.IsError || len(text)+len(raw) > rosterBudget {
		t.Fatalf("default result %d B (text %d, structured %d), over %d:\n%s", len(text)+len(raw), len(text), len(raw), rosterBudget, text)
	}
	var sc rosterResult
	if err := json.Unmarshal(raw, &sc); err != nil {
		t.Fatal(err)
	}
	if sc.Summary == nil || sc.Total != 1000 || len(sc.Summary.Team) != summaryPeers || sc.Summary.MoreTeam != len(ci.Team)-summaryPeers ||
		len(sc.Summary.Recent) != summaryPeers || len(sc.Summary.Hosts) != summaryHosts || sc.Summary.MoreHosts != 50-summaryHosts {
		t.Errorf("the summary lost what fits: total %d, team %d (+%d), recent %d, hosts %d (+%d)", sc.Total, len(sc.Summary.Team), sc.Summary.MoreTeam,
			len(sc.Summary.Recent), len(sc.Summary.Hosts), sc.Summary.MoreHosts)
	}
	seen, pages, cursor := map[string]bool{}, 0, ""
	for {
		text, raw, r := rosterCall(t, f, `{"list":true,"cursor":"`+cursor+`"}`)
		if r.IsError || len(text)+len(raw) > rosterBudget {
			t.Fatalf("page %d: %d B, over %d (error %v)", pages+1, len(text)+len(raw), rosterBudget, r.IsError)
		}
		var p rosterResult
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
		pages++
		for _, e := range p.Entities {
			if seen[e.GID] {
				t.Fatalf("page %d repeats %s", pages, e.Name)
			}
			seen[e.GID] = true
		}
		if p.Cursor == "" {
			break
		}
		cursor = p.Cursor
	}
	if len(seen) != 1000 {
		t.Errorf("the pages listed %d entities, want 1000", len(seen))
	}
	t.Logf("the whole list: %d pages", pages)
}

// TestRosterSummaryTrimsToItsBudget: entities whose every field is at its
// longest still make a summary within the budget (its lists cut, and the
// cut counted).
func TestRosterSummaryTrimsToItsBudget(t *testing.T) {
	v, ci := fleet(40, 25)
	for i := range v.Hosts {
		v.Hosts[i].Host = strings.Repeat("h", 60) + fmt.Sprint(i)
		v.Hosts[i].Profiles = []string{strings.Repeat("p", 120), strings.Repeat("q", 120)}
		v.Hosts[i].Trust, v.Hosts[i].Why = bridge.TrustOneWay, strings.Repeat("why ", 40)
	}
	for i := range v.Entities {
		v.Entities[i].Name = strings.Repeat("n", 60) + fmt.Sprint(i)
		v.Entities[i].Host = v.Hosts[i/25].Host
		v.Entities[i].Status = strings.Repeat("s", 100) + fmt.Sprint(i%30)
	}
	text, raw, _ := rosterCall(t, &fakeFabric{roster: v, circle: ci}, `{}`)
	if len(text)+len(raw) > rosterBudget {
		t.Fatalf("%d B, over %d", len(text)+len(raw), rosterBudget)
	}
	for _, page := range []string{`{"list":true}`, `{"list":true,"max":200}`} {
		text, raw, _ := rosterCall(t, &fakeFabric{roster: v, circle: ci}, page)
		if len(text)+len(raw) > rosterBudget {
			t.Fatalf("%s: %d B, over %d", page, len(text)+len(raw), rosterBudget)
		}
	}
}

// TestRosterCursorPaging: three pages of a listing, with an entity added
// before the cursor's place and one after it, and one removed, between
// pages: every entity there all along is listed exactly once, in order.
func TestRosterCursorPaging(t *testing.T) {
	v, ci := fleet(3, 4) // 12 entities, 5 a page: 3 pages
	f := &fakeFabric{roster: v, circle: ci}
	page := func(cursor string) rosterResult {
		_, raw, r := rosterCall(t, f, `{"list":true,"max":5,"cursor":"`+cursor+`"}`)
		if r.IsError {
			t.Fatalf("cursor %q: %s", cursor, raw)
		}
		var p rosterResult
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var got []string
	names := func(p rosterResult) {
		for _, e := range p.Entities {
			got = append(got, e.Name)
		}
	}
	p1 := page("")
	names(p1)
	if len(p1.Entities) != 5 || p1.Cursor == "" {
		t.Fatalf("page 1: %d entities, cursor %q", len(p1.Entities), p1.Cursor)
	}
	// between pages 1 and 2: one comes on the first host (before the
	// cursor), one on the last (after it), and one not yet listed goes
	es := f.roster.Entities
	gone := es[7].Name
	added := []bridge.EntityView{es[0], es[11]}
	added[0].GID, added[0].Name = "new-before", "aaa-new"
	added[1].GID, added[1].Name = "new-after", "zzz-new"
	f.roster.Entities = append(append(append([]bridge.EntityView{}, es[:7]...), es[8:]...), added...)
	p2 := page(p1.Cursor)
	names(p2)
	// between pages 2 and 3: one already listed goes
	f.roster.Entities = f.roster.Entities[1:]
	p3 := page(p2.Cursor)
	names(p3)
	if p3.Cursor != "" {
		t.Errorf("page 3 is not the last: cursor %q", p3.Cursor)
	}
	var survivors []string
	for _, n := range got {
		if n != "aaa-new" && n != "zzz-new" {
			survivors = append(survivors, n)
		}
	}
	if strings.Join(survivors, " ") != strings.Join(sortedByKey(es, gone), " ") {
		t.Errorf("the pages listed\n%v\nwant every survivor once, in order\n%v", survivors, sortedByKey(es, gone))
	}
	if !contains(got, "zzz-new") || contains(got, "aaa-new") {
		t.Errorf("an entity added after the cursor's place must be listed, one before it not: %v", got)
	}
}

func sortedByKey(es []bridge.EntityView, without string) []string {
	var ps []*bridge.EntityView
	for i := range es {
		if es[i].Name != without {
			ps = append(ps, &es[i])
		}
	}
	sort.Slice(ps, func(i, j int) bool { return keyOf(ps[i]).less(keyOf(ps[j])) })
	out := make([]string, len(ps))
	for i, e := range ps {
		out[i] = e.Name
	}
	return out
}

// FuzzRosterCursor: parseRosterCursor never panics, and what it accepts
// is a cursor rosterCursor writes again byte for byte (so no two texts
// name one place, and nothing else gets in).
func FuzzRosterCursor(f *testing.F) {
	f.Add(rosterCursor(rosterKey{"h1", "lead", "0b6c3a52-1111-4e7e-9f00-000000000001"}))
	f.Add(rosterCursor(rosterKey{"h", "", "g"}))
	f.Add("")
	f.Add("not-a-cursor")
	f.Add("cjEAaABuAGc")
	f.Add(strings.Repeat("A", 2000))
	f.Fuzz(func(t *testing.T, c string) {
		k, err := parseRosterCursor(c)
		if err != nil {
			return
		}
		if again := rosterCursor(k); again != c {
			t.Fatalf("%q parsed as %+v, which writes %q", c, k, again)
		}
	})
}

// BenchmarkRosterSummary1000: the default bridge_roster call through its
// handler, 1,000 entities on 50 hosts (the core's Roster is the fake's:
// this measures what the MCP layer adds).
func BenchmarkRosterSummary1000(b *testing.B) {
	v, ci := fleet(50, 20)
	f := &fakeFabric{roster: v, circle: ci}
	s := New(nil, nil)
	s.fab = f
	benchDefaultRoster(b, s, caller)
}

// BenchmarkRosterSummary1000Core: the same call on a real core with
// 1,000 entities registered on it (one host), so Core.Roster's own work
// is in the figure too.
func BenchmarkRosterSummary1000Core(b *testing.B) {
	dir := b.TempDir()
	tr, err := embedded.Open(filepath.Join(dir, "t.db"), embedded.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	st, err := bstore.Open(filepath.Join(dir, "s.db"), 0)
	if err != nil {
		b.Fatal(err)
	}
	c, err := bridge.New(bridge.Config{Host: "h1", Transport: tr, Store: st, MaxWait: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close(); st.Close(); tr.Close() })
	var lead string
	for i := range 1000 {
		role, name := bridge.RoleWorker, fmt.Sprintf("coder-%03d", i)
		if i%20 == 0 {
			role, name = bridge.RolePrimary, fmt.Sprintf("lead-%03d", i)
		}
		e, _, err := c.Register(context.Background(), bridge.RegisterRequest{Name: name, Role: role, Groups: []string{"backend"}})
		if err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			lead = e.GID
		}
	}
	s := New(c, nil)
	benchDefaultRoster(b, s, lead)
}

// benchDefaultRoster times s's default bridge_roster call by caller and
// reports its p50 (the figure) beside ns/op.
func benchDefaultRoster(b *testing.B, s *Server, caller string) {
	h := s.rosterTool().Handler
	req := mcpgo.CallToolRequest{}
	req.Params.Name, req.Params.RawArguments = "bridge_roster", json.RawMessage(`{}`)
	ctx := WithEntity(context.Background(), caller)
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		r, err := h(ctx, req)
		if err != nil || r.IsError {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
}
