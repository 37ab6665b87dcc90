package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/herdbridge/herdbridge/bridge"
)

// bridge_roster answers what fits a model's context, whatever the size of
// the fabric: by default a summary (counts per host, role and status; the
// caller's team; who it talked with lately), else one page of the
// entities that match its filters, in a stable order (host, name, gid)
// with a keyset cursor to the next page. No result passes rosterBudget
// bytes of text and structuredContent together. Core.Roster, the full
// view, stays whole for the CLI, the page, doctor and metrics.

const (
	// rosterBudget bounds one result: len(text) + len(JSON of
	// structuredContent).
	rosterBudget = 16 << 10
	// rosterPageDefault and rosterPageMax bound the entities of a page
	// (the byte budget may stop it sooner).
	rosterPageDefault = 30
	rosterPageMax     = 200
	// summaryHosts, summaryPeers and summaryStatuses bound the summary's
	// lists: hosts, team and recent peers each, distinct statuses.
	summaryHosts    = 16
	summaryPeers    = 20
	summaryStatuses = 12
)

type rosterArgs struct {
	Host   string `json:"host,omitempty" jsonschema:"List only the entities of this host"`
	Role   string `json:"role,omitempty" jsonschema:"List only the entities of this role: primary, worker or orchestrator"`
	Group  string `json:"group,omitempty" jsonschema:"List only the entities in this group"`
	Query  string `json:"query,omitempty" jsonschema:"List only the entities whose name, host, role or a group contains this text (case-insensitive)"`
	List   bool   `json:"list,omitempty" jsonschema:"List the entities page by page instead of the summary (a filter or a cursor lists too)"`
	Cursor string `json:"cursor,omitempty" jsonschema:"The next page of a listing: the cursor the last page returned, with the same filters"`
	Max    *int   `json:"max,omitempty" jsonschema:"Most entities on a page (default 30, at most 200; a page also stops at 16 KB)"`
}

// rosterResult is bridge_roster's structuredContent.
type rosterResult struct {
	// Summary is the default answer (absent from a listing).
	Summary *rosterSummary `json:"summary,omitempty"`
	// Hosts and Entities are a listing's page: its entities, and the
	// hosts they are on (both empty in a summary).
	Hosts    []bridge.HostView   `json:"hosts"`
	Entities []bridge.EntityView `json:"entities"`
	// Total is how many entities match (a listing) or are on the fabric
	// (a summary).
	Total int `json:"total"`
	// Cursor is the next page's; absent on the last page.
	Cursor string `json:"cursor,omitempty"`
	Reason string `json:"reason,omitempty"`
	Next   string `json:"next,omitempty"`
}

// rosterSummary is the roster in counts, and the caller's own circle.
type rosterSummary struct {
	Hosts     []hostCount `json:"hosts"`
	MoreHosts int         `json:"moreHosts,omitempty"` // hosts not in hosts (a listing with host=… shows one)
	Roles     []tally     `json:"roles"`
	Statuses  []tally     `json:"statuses"`
	// You is the caller itself.
	You *peerLine `json:"you,omitempty"`
	// Lead is the caller's primary (name@host): itself when it is one.
	Lead     string     `json:"lead,omitempty"`
	Team     []peerLine `json:"team"` // Lead and its workers, the caller left out
	MoreTeam int        `json:"moreTeam,omitempty"`
	Recent   []peerLine `json:"recent"` // who the caller last exchanged a message with, newest first
}

type hostCount struct {
	Host     string   `json:"host"`
	Local    bool     `json:"local,omitempty"`
	Entities int      `json:"entities"`
	Profiles []string `json:"profiles"`
	Trust    string   `json:"trust,omitempty"`
	Why      string   `json:"why,omitempty"`
	Seal     string   `json:"seal,omitempty"` // whether what goes to it crosses the broker sealed (bridge.HostView.Seal)
}

type tally struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

// peerLine is an entity in the summary, in short.
type peerLine struct {
	Name    string      `json:"name"`
	Host    string      `json:"host"`
	GID     string      `json:"gid"`
	Role    bridge.Role `json:"role"`
	Status  string      `json:"status"`
	Held    int         `json:"held,omitempty"`
	Waiting bool        `json:"waiting,omitempty"`
}

func (s *Server) rosterTool() toolDef {
	t := newTool[rosterArgs, rosterResult]("bridge_roster", "List entities and hosts", effect{readOnly: true, idempotent: true},
		"Find who is on the herdbridge fabric: use it to find who to send to (names for bridge_send, profiles for bridge_spawn) or to check that a worker is alive. "+
			"By default a summary: entities per host, role and status, your team (your primary and its workers) and who you talked with lately, with their status. "+
			"host, role, group or query (or list=true) list the matching entities instead, with role, groups, status, held count and whether they wait, a page at a time: pass the cursor a page returns for the next. "+
			"A host's trust is one-way when it does not trust this host (a send there fails at once with the reason), untrusted when this host does not trust it, unknown for an older gateway.")
	h := func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		gid, ok := EntityFrom(ctx)
		if !ok {
			return rosterError("this connection is not registered as an entity", "connect with a token or through herdbridge mcp --name"), nil
		}
		var a rosterArgs
		if err := decodeArgs(req, &a); err != nil {
			return rosterError(err.Error(), errorNext("bridge_roster")), nil
		}
		q, err := a.query()
		if err != nil {
			return rosterError(err.Error(), errorNext("bridge_roster")), nil
		}
		v := s.fab.Roster()
		if !q.list {
			return summaryResult(v, s.fab.Circle(gid), gid), nil
		}
		return listResult(v, q), nil
	}
	return toolDef{t, h}
}

// rosterQuery is a checked bridge_roster call.
type rosterQuery struct {
	list                     bool
	host, role, group, query string
	after                    *rosterKey // nil: from the first entity
	max                      int
}

func (a rosterArgs) query() (rosterQuery, error) {
	q := rosterQuery{host: a.Host, role: a.Role, group: a.Group, query: strings.ToLower(a.Query), max: rosterPageDefault}
	q.list = a.List || a.Host != "" || a.Role != "" || a.Group != "" || a.Query != "" || a.Cursor != ""
	if a.Role != "" && !bridge.Role(a.Role).Valid() {
		return q, fmt.Errorf("role %s is not a role: use primary, worker or orchestrator", word(a.Role))
	}
	if a.Max != nil {
		if *a.Max < 1 || *a.Max > rosterPageMax {
			return q, fmt.Errorf("max must be between 1 and %d", rosterPageMax)
		}
		q.max = *a.Max
	}
	if a.Cursor != "" {
		k, err := parseRosterCursor(a.Cursor)
		if err != nil {
			return q, errors.New(badCursor)
		}
		q.after = &k
	}
	return q, nil
}

func (q rosterQuery) matches(e *bridge.EntityView) bool {
	if q.host != "" && !strings.EqualFold(e.Host, q.host) || q.role != "" && string(e.Role) != q.role {
		return false
	}
	if q.group != "" && !contains(e.Groups, q.group) {
		return false
	}
	if q.query == "" {
		return true
	}
	if containsFold(e.Name, q.query) || containsFold(e.Host, q.query) || containsFold(string(e.Role), q.query) {
		return true
	}
	for _, g := range e.Groups {
		if containsFold(g, q.query) {
			return true
		}
	}
	return false
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// rosterKey is where an entity sorts in a listing: by host, then name,
// then gid (unique), so a page's last key says where the next begins
// whatever came or went meanwhile.
type rosterKey struct{ host, name, gid string }

func keyOf(e *bridge.EntityView) rosterKey { return rosterKey{e.Host, e.Name, e.GID} }

func (k rosterKey) less(o rosterKey) bool {
	if k.host != o.host {
		return k.host < o.host
	}
	if k.name != o.name {
		return k.name < o.name
	}
	return k.gid < o.gid
}

// badCursor is the sentence for a cursor parseRosterCursor refuses.
const badCursor = "cursor is not one bridge_roster returned: pass the cursor of the last page exactly as it came, or leave cursor out to list from the first entity"

// cursorTag opens every cursor: its version.
const cursorTag = "r1"

// maxCursorBytes bounds a cursor as sent (a key of a 63-byte host, a
// 64-byte name and a gid encodes to well under it).
const maxCursorBytes = 1024

// rosterCursor is k as a cursor: opaque text the model passes back.
func rosterCursor(k rosterKey) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorTag + "\x00" + k.host + "\x00" + k.name + "\x00" + k.gid))
}

// parseRosterCursor is the key a cursor holds, or an error for anything
// rosterCursor cannot have written.
func parseRosterCursor(c string) (rosterKey, error) {
	if len(c) > maxCursorBytes {
		return rosterKey{}, errors.New("cursor too long")
	}
	for i := 0; i < len(c); i++ { // the decoder would skip line breaks
		if b := c[i]; !(b >= 'A' && b <= 'Z' || b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-' || b == '_') {
			return rosterKey{}, errors.New("not base64url")
		}
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(c) // Strict: one text a cursor
	if err != nil {
		return rosterKey{}, err
	}
	parts := strings.Split(string(raw), "\x00")
	if len(parts) != 4 || parts[0] != cursorTag || !utf8.Valid(raw) {
		return rosterKey{}, errors.New("not a roster cursor")
	}
	k := rosterKey{parts[1], parts[2], parts[3]}
	if k.host == "" || k.gid == "" {
		return rosterKey{}, errors.New("not a roster cursor")
	}
	return k, nil
}

// listResult is one page of v's entities that match q.
func listResult(v bridge.RosterView, q rosterQuery) *mcpgo.CallToolResult {
	es := make([]*bridge.EntityView, 0, len(v.Entities))
	for i := range v.Entities {
		if q.matches(&v.Entities[i]) {
			es = append(es, &v.Entities[i])
		}
	}
	sort.Slice(es, func(i, j int) bool { return keyOf(es[i]).less(keyOf(es[j])) })
	from := 0
	if q.after != nil {
		from = sort.Search(len(es), func(i int) bool { return q.after.less(keyOf(es[i])) })
	}
	hosts := map[string]*bridge.HostView{}
	for i := range v.Hosts {
		hosts[v.Hosts[i].Host] = &v.Hosts[i]
	}
	r := rosterResult{Hosts: []bridge.HostView{}, Entities: []bridge.EntityView{}, Total: len(es)}
	listed := map[string]bool{}
	used := 1024 // the header, the next step, the JSON's frame
	for i := from; i < len(es) && len(r.Entities) < q.max; i++ {
		e := es[i]
		cost := entityCost(e)
		h, newHost := hosts[e.Host]
		newHost = newHost && !listed[e.Host]
		if newHost {
			cost += hostCost(h)
		}
		if len(r.Entities) > 0 && used+cost > rosterBudget {
			break
		}
		used += cost
		if newHost {
			listed[e.Host] = true
			r.Hosts = append(r.Hosts, *h)
		}
		r.Entities = append(r.Entities, *e)
	}
	if q.host != "" && len(r.Hosts) == 0 { // nobody there: the host itself, when it is one
		for i := range v.Hosts {
			if strings.EqualFold(v.Hosts[i].Host, q.host) {
				r.Hosts = append(r.Hosts, v.Hosts[i])
				break
			}
		}
	}
	for {
		res, text := finishPage(r, from, len(es), q)
		if len(r.Entities) <= 1 || rosterSize(res, text) <= rosterBudget {
			return rosterStructured(res, text)
		}
		r.Entities = r.Entities[:len(r.Entities)-1] // the estimate fell short: one fewer
		r.Hosts = hostsOf(r.Hosts, r.Entities)
	}
}

// finishPage sets r's cursor (when entities are left past its page) and
// next, and writes its text.
func finishPage(r rosterResult, from, matched int, q rosterQuery) (rosterResult, string) {
	r.Cursor, r.Next = "", rosterNext
	if n := len(r.Entities); n > 0 && from+n < matched {
		r.Cursor = rosterCursor(keyOf(&r.Entities[n-1]))
		r.Next = "bridge_roster(cursor=" + r.Cursor + ") with the same filters lists the next page; " + rosterNext
	}
	return r, listText(r, from, q)
}

// hostsOf is hs without the hosts none of es is on.
func hostsOf(hs []bridge.HostView, es []bridge.EntityView) []bridge.HostView {
	on := map[string]bool{}
	for i := range es {
		on[es[i].Host] = true
	}
	out := hs[:0:0]
	for _, h := range hs {
		if on[h.Host] {
			out = append(out, h)
		}
	}
	return out
}

// entityCost and hostCost are about the bytes an entity or host adds to a
// page: its JSON and its text line.
func entityCost(e *bridge.EntityView) int {
	raw, _ := json.Marshal(e)
	return len(raw) + len(entityLine(e)) + 1
}

func hostCost(h *bridge.HostView) int {
	raw, _ := json.Marshal(h)
	return len(raw) + len(hostLine(h)) + 1
}

// listText is a page as text: what it is, a line per host and per entity,
// the next step.
func listText(r rosterResult, from int, q rosterQuery) string {
	var b strings.Builder
	if len(r.Entities) == 0 {
		fmt.Fprintf(&b, "no entities past the cursor: %d match%s\n", r.Total, q.filterText())
	} else {
		fmt.Fprintf(&b, "entities %d-%d of %d that match%s (by host, name, gid)\n", from+1, from+len(r.Entities), r.Total, q.filterText())
	}
	for i := range r.Hosts {
		b.WriteString(hostLine(&r.Hosts[i]))
		b.WriteByte('\n')
	}
	for i := range r.Entities {
		b.WriteString(entityLine(&r.Entities[i]))
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "next: %s", r.Next)
	return b.String()
}

func (q rosterQuery) filterText() string {
	var parts []string
	for _, f := range [][2]string{{"host", q.host}, {"role", q.role}, {"group", q.group}, {"query", q.query}} {
		if f[1] != "" {
			parts = append(parts, f[0]+"="+word(f[1]))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " " + strings.Join(parts, " ")
}

// hostLine and entityLine are a host's and an entity's roster lines. Their
// fields are of the forms a gateway writes (cleanPresence drops any other
// from a heartbeat); each still goes through word, so none could carry a
// line break or a fence into the text.
func hostLine(h *bridge.HostView) string {
	var b strings.Builder
	fmt.Fprintf(&b, "host %s  profiles: %s", word(h.Host), words(h.Profiles, ", "))
	b.WriteString(sealNote(h.Seal))
	if h.Trust != "" && h.Trust != bridge.TrustBoth {
		fmt.Fprintf(&b, "  trust: %s", word(h.Trust))
		if h.Why != "" {
			fmt.Fprintf(&b, " (%s)", h.Why)
		}
	}
	return b.String()
}

// sealNote is a host line's seal state ("" when not set: this host, or
// sealing not configured): whether what goes to it crosses the broker
// sealed.
func sealNote(seal string) string {
	if seal == "" {
		return ""
	}
	return "  seal: " + seal // one of the core's own states (bridge.SealState*), never a peer's text
}

func entityLine(e *bridge.EntityView) string {
	return fmt.Sprintf("%s@%s  %s  %s  held=%d groups=%s", word(e.Name), word(e.Host), word(string(e.Role)), word(e.Status), e.Held, words(e.Groups, ","))
}

func words(l []string, sep string) string {
	out := make([]string, len(l))
	for i, s := range l {
		out[i] = word(s)
	}
	return strings.Join(out, sep)
}

// summaryResult is v in counts, with the circle of the caller gid.
func summaryResult(v bridge.RosterView, ci bridge.Circle, gid string) *mcpgo.CallToolResult {
	sum := &rosterSummary{Roles: []tally{}, Statuses: []tally{}, Team: []peerLine{}, Recent: []peerLine{}}
	byGID := make(map[string]*bridge.EntityView, len(v.Entities))
	perHost := map[string]int{}
	roles, statuses := map[string]int{}, map[string]int{}
	for i := range v.Entities {
		e := &v.Entities[i]
		byGID[e.GID] = e
		perHost[e.Host]++
		roles[cmpOr(string(e.Role), "unknown")]++
		statuses[cmpOr(e.Status, "unknown")]++
	}
	sum.Hosts, sum.MoreHosts = hostCounts(v.Hosts, perHost)
	sum.Roles = tallies(roles, len(roles))
	sum.Statuses = tallies(statuses, summaryStatuses)
	circle(sum, byGID, ci, gid)
	r := rosterResult{Summary: sum, Hosts: []bridge.HostView{}, Entities: []bridge.EntityView{}, Total: len(v.Entities), Next: rosterNext}
	text := summaryText(r)
	for rosterSize(r, text) > rosterBudget && trimSummary(sum) {
		text = summaryText(r)
	}
	return rosterStructured(r, text)
}

// hostCounts lists this host first, then the most populous, at most
// summaryHosts; more is how many are left out.
func hostCounts(hs []bridge.HostView, perHost map[string]int) (out []hostCount, more int) {
	out = make([]hostCount, 0, min(len(hs), summaryHosts))
	order := make([]*bridge.HostView, len(hs))
	for i := range hs {
		order[i] = &hs[i]
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := order[i], order[j]
		if a.Local != b.Local {
			return a.Local
		}
		if perHost[a.Host] != perHost[b.Host] {
			return perHost[a.Host] > perHost[b.Host]
		}
		return a.Host < b.Host
	})
	for _, h := range order {
		if len(out) == summaryHosts {
			more++
			continue
		}
		out = append(out, hostCount{Host: h.Host, Local: h.Local, Entities: perHost[h.Host], Profiles: h.Profiles, Trust: h.Trust, Why: h.Why, Seal: h.Seal})
	}
	return out, more
}

// tallies is m most frequent first, at most n names (the rest as one
// "other").
func tallies(m map[string]int, n int) []tally {
	out := make([]tally, 0, len(m))
	for k, c := range m {
		out = append(out, tally{k, c})
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Count > out[j].Count || out[i].Count == out[j].Count && out[i].Name < out[j].Name
	})
	if len(out) > n {
		other := 0
		for _, t := range out[n-1:] {
			other += t.Count
		}
		out = append(out[:n-1], tally{"other", other})
	}
	return out
}

// circle fills the caller's lead, team and recent peers from ci: those
// still on the roster, at most summaryPeers each. A worker that works on
// no brief takes the primary it last talked with as its lead.
func circle(sum *rosterSummary, byGID map[string]*bridge.EntityView, ci bridge.Circle, gid string) {
	if me := byGID[gid]; me != nil {
		p := peerOf(me)
		sum.You = &p
	}
	lead := byGID[ci.Lead]
	for _, p := range ci.Recent {
		if e := byGID[p]; e != nil {
			if lead == nil && (e.Role == bridge.RolePrimary || e.Role == bridge.RoleOrchestrator) {
				lead = e
			}
			if len(sum.Recent) < summaryPeers {
				sum.Recent = append(sum.Recent, peerOf(e))
			}
		}
	}
	if lead == nil {
		return
	}
	sum.Lead = lead.Name + "@" + lead.Host
	seen := map[string]bool{gid: true}
	add := func(e *bridge.EntityView) {
		if e == nil || seen[e.GID] {
			return
		}
		seen[e.GID] = true
		if len(sum.Team) < summaryPeers {
			sum.Team = append(sum.Team, peerOf(e))
		} else {
			sum.MoreTeam++
		}
	}
	add(lead)
	for _, p := range ci.Team {
		if e := byGID[p]; e != nil && e.Role == bridge.RoleWorker {
			add(e)
		}
	}
}

func peerOf(e *bridge.EntityView) peerLine {
	return peerLine{Name: e.Name, Host: e.Host, GID: e.GID, Role: e.Role, Status: e.Status, Held: e.Held, Waiting: e.Waiting}
}

// trimSummary drops the last line of the longest of the summary's lists;
// false when there is nothing left to drop.
func trimSummary(sum *rosterSummary) bool {
	switch n := max(len(sum.Recent), len(sum.Team), len(sum.Hosts)-1); {
	case n <= 0:
		return false
	case n == len(sum.Recent):
		sum.Recent = sum.Recent[:n-1]
	case n == len(sum.Team):
		sum.Team = sum.Team[:n-1]
		sum.MoreTeam++
	default:
		sum.Hosts = sum.Hosts[:len(sum.Hosts)-1]
		sum.MoreHosts++
	}
	return true
}

// rosterSize is what rosterBudget bounds: text and structuredContent.
func rosterSize(r rosterResult, text string) int {
	raw, _ := json.Marshal(r)
	return len(text) + len(raw)
}

// summaryText is a summary as text.
func summaryText(r rosterResult) string {
	sum := r.Summary
	var b strings.Builder
	fmt.Fprintf(&b, "roster summary: %d entities on %d hosts; bridge_roster(host=…, role=…, group=…, query=…) lists those that match, list=true lists everyone, a page at a time\n",
		r.Total, len(sum.Hosts)+sum.MoreHosts)
	for _, h := range sum.Hosts {
		here := ""
		if h.Local {
			here = " (this host)"
		}
		fmt.Fprintf(&b, "host %s%s  entities=%d  profiles: %s", word(h.Host), here, h.Entities, words(h.Profiles, ", "))
		b.WriteString(sealNote(h.Seal))
		if h.Trust != "" && h.Trust != bridge.TrustBoth {
			fmt.Fprintf(&b, "  trust: %s", word(h.Trust))
			if h.Why != "" {
				fmt.Fprintf(&b, " (%s)", h.Why)
			}
		}
		b.WriteByte('\n')
	}
	if sum.MoreHosts > 0 {
		fmt.Fprintf(&b, "%d more hosts: bridge_roster(host=<host>) lists one\n", sum.MoreHosts)
	}
	fmt.Fprintf(&b, "roles: %s\nstatuses: %s\n", tallyText(sum.Roles), tallyText(sum.Statuses))
	if sum.You != nil {
		b.WriteString("you:\n")
		writePeers(&b, []peerLine{*sum.You})
	}
	if sum.Lead != "" {
		fmt.Fprintf(&b, "your team (lead %s):\n", word(sum.Lead))
		writePeers(&b, sum.Team)
		if sum.MoreTeam > 0 {
			fmt.Fprintf(&b, "  and %d more\n", sum.MoreTeam)
		}
	}
	if len(sum.Recent) > 0 {
		b.WriteString("you talked with lately (newest first):\n")
		writePeers(&b, sum.Recent)
	}
	fmt.Fprintf(&b, "next: %s", r.Next)
	return b.String()
}

func tallyText(ts []tally) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = fmt.Sprintf("%s %d", word(t.Name), t.Count)
	}
	return strings.Join(parts, ", ")
}

func writePeers(b *strings.Builder, ps []peerLine) {
	for _, p := range ps {
		fmt.Fprintf(b, "  %s@%s  %s  %s  held=%d", word(p.Name), word(p.Host), word(string(p.Role)), word(p.Status), p.Held)
		if p.Waiting {
			b.WriteString("  waiting")
		}
		b.WriteByte('\n')
	}
}

// rosterNext is what to do with a roster.
const rosterNext = "bridge_send(target=<name>, message) briefs a worker or reports to a primary; bridge_spawn(profile) starts a worker from a host's profile"

func rosterStructured(r rosterResult, text string) *mcpgo.CallToolResult {
	return mcpgo.NewToolResultStructured(r, text)
}

// rosterError is bridge_roster's tool error, shaped as its output schema
// says (hosts and entities, empty).
func rosterError(reason, next string) *mcpgo.CallToolResult {
	r := rosterResult{Hosts: []bridge.HostView{}, Entities: []bridge.EntityView{}, Reason: reason, Next: next}
	res := mcpgo.NewToolResultStructured(r, fmt.Sprintf("status: error — %s\nnext: %s", reason, next))
	res.IsError = true
	return res
}
