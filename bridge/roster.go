package bridge

import (
	"sort"
	"strings"
	"time"
)

// EntityView is one roster line.
type EntityView struct {
	Entity
	Held     int    `json:"held"`
	Waiting  bool   `json:"waiting"`
	Sessions int    `json:"sessions"`
	Queued   int    `json:"queued,omitempty"` // briefs waiting to be typed into its pane (forward path)
	Status   string `json:"status"`           // the live herdr agent status in a pane (idle|working|blocked|done|unknown), else online | detached | stale
	// LastSeen is a local entity's last activity while it has no session
	// (reap.go says what counts).
	LastSeen *time.Time `json:"lastSeen,omitempty"`
}

// HostView is one host of the roster.
type HostView struct {
	Host     string   `json:"host"`
	Local    bool     `json:"local"`
	Profiles []string `json:"profiles"`
	Key      string   `json:"key,omitempty"` // host key fingerprint (SHA256:…), across hosts
	// Trust flags another host: both, one-way (it does not trust this
	// host: a send there fails at once), untrusted (this host does not
	// trust it: it is listed from heartbeats that were refused) or unknown
	// (a gateway older than the trust list). Empty for this host, and
	// without keys (one host).
	Trust string `json:"trust,omitempty"`
	// Why says what is wrong with the trust and how to fix it.
	Why string `json:"why,omitempty"`
	// LastHeartbeat is when this gateway last heard the host's heartbeat
	// (this clock); for this host, when its own last came back through
	// the broker. Nil when none was heard (one host: always).
	LastHeartbeat *time.Time `json:"lastHeartbeat,omitempty"`
	// Seal says what goes to the host: sealed (its HPKE key is known),
	// clear (seal is off here) or "no key" (sent clear under seal auto,
	// refused under require). Empty for this host (its own messages never
	// reach the broker) and without sealing (one host).
	Seal string `json:"seal,omitempty"`
}

// RosterView is bridge_roster.
type RosterView struct {
	Hosts    []HostView   `json:"hosts"`
	Entities []EntityView `json:"entities"`
	// Reason (a refused call) and Next (what to call next) are the MCP
	// layer's: what the model reads besides the roster.
	Reason string `json:"reason,omitempty"`
	Next   string `json:"next,omitempty"`
}

// Roster is the federated presence view: this host's entities first-hand,
// the other hosts' from their heartbeats.
func (c *Core) Roster() RosterView {
	v := RosterView{Hosts: []HostView{{Host: c.cfg.Host, Local: true, Profiles: c.profiles(), Key: c.cfg.KeyFingerprint}}, Entities: []EntityView{}}
	queued, err := c.st.QueuedCounts()
	if err != nil {
		c.log.Warn("roster: pane queues not readable", "err", err)
	}
	for _, st := range c.reg.all() {
		line := c.rosterLine(st)
		if line.PaneID != "" {
			line.Queued = queued[line.PaneID]
		}
		v.Entities = append(v.Entities, line)
	}
	c.pres.views(&v)
	c.flagTrust(&v)
	c.flagSeal(&v)
	sort.Slice(v.Hosts[1:], func(i, j int) bool { return v.Hosts[1+i].Host < v.Hosts[1+j].Host })
	sort.Slice(v.Entities, func(i, j int) bool {
		a, b := v.Entities[i], v.Entities[j]
		return a.Host < b.Host || a.Host == b.Host && a.Name < b.Name
	})
	return v
}

// flagTrust sets each other host's trust flag, and lists the hosts this
// one does not trust (heard only in refused heartbeats).
func (c *Core) flagTrust(v *RosterView) {
	if c.cfg.Verifier == nil {
		return
	}
	peers := c.Peers()
	listed := map[string]bool{}
	for i := range v.Hosts {
		h := &v.Hosts[i]
		listed[h.Host] = true
		if !h.Local {
			h.Trust = peerTrust(peers, h.Host)
			h.Why = peerWhy(peers, h.Host)
		}
	}
	for _, p := range peers {
		if !listed[p.Host] && p.Trust == TrustUntrusted && p.Key != "" {
			v.Hosts = append(v.Hosts, HostView{Host: p.Host, Profiles: []string{}, Key: p.Key, Trust: p.Trust, Why: p.Why})
		}
	}
}

func (c *Core) rosterLine(st *entState) EntityView {
	now := c.cfg.Now()
	st.mu.Lock()
	defer st.mu.Unlock()
	ev := EntityView{Entity: st.snapshot(), Sessions: st.sessions, Waiting: len(st.waiters) > 0, Status: "online", Held: st.unclaimedHeld()}
	if st.sessions == 0 {
		ev.Status = "detached"
		seen := st.lastSeen.UTC()
		ev.LastSeen = &seen
		if c.idle(st, now, c.cfg.StaleAfter) {
			ev.Status = StatusStale
		}
	}
	if st.paneStatus != "" {
		ev.Status = st.paneStatus
	}
	return ev
}

// Resolve finds an entity by name, name@host or gid. An unknown target is a
// UserError that names it and lists close matches.
func (c *Core) Resolve(target string) (Entity, error) {
	target = strings.TrimSpace(target)
	if target == "" {
		return Entity{}, userErr("target is empty: name an entity (name, name@host or gid); bridge_roster lists them")
	}
	if err := checkTarget(target); err != nil {
		return Entity{}, err
	}
	if st := c.reg.get(target); st != nil {
		if other := c.reg.named(target); other != nil && other != st {
			// an older entity named like a gid (no longer accepted)
			return Entity{}, userErr("target %s is ambiguous: it is the gid of %s and the name of the entity with gid %s; name %s by its name, the other by its gid", Clip(target), st.Name, other.GID, st.Name)
		}
		return st.view(), nil
	}
	name, host := target, ""
	if i := strings.LastIndexByte(target, '@'); i >= 0 {
		name, host = target[:i], target[i+1:]
		if host == c.cfg.Host {
			host = ""
		} else if !c.pres.knowsHost(host) {
			return Entity{}, userErr("unknown target %s: no gateway of host %s is present (this is %q); bridge_roster lists the hosts", Clip(target), Clip(host), c.cfg.Host)
		}
	}
	if st := c.reg.named(name); st != nil && host == "" {
		return st.view(), nil
	}
	if r, amb := c.pres.find(target, name, host); r != nil {
		return r.entity(), nil
	} else if len(amb) > 1 {
		return Entity{}, userErr("target %s is ambiguous: it names %s; say which with name@host", Clip(target), strings.Join(amb, ", "))
	}
	names := append(c.reg.names(), c.pres.names()...)
	if s := closeMatches(name, names); len(s) > 0 {
		return Entity{}, userErr("unknown target %s: did you mean %s?", Clip(target), strings.Join(s, ", "))
	}
	return Entity{}, userErr("unknown target %s: no entity of that name; bridge_roster lists who is here", Clip(target))
}

// closeMatches returns up to 3 names within edit distance 2 of s, or that
// contain it, closest first.
func closeMatches(s string, names []string) []string {
	type cand struct {
		n string
		d int
	}
	var cs []cand
	ls := strings.ToLower(s)
	for _, n := range names {
		ln := strings.ToLower(n)
		d := editDistance(ls, ln)
		if d <= 2 || (len(ls) >= 3 && strings.Contains(ln, ls)) {
			cs = append(cs, cand{n, d})
		}
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].d < cs[j].d || cs[i].d == cs[j].d && cs[i].n < cs[j].n })
	var out []string
	for i := 0; i < len(cs) && i < 3; i++ {
		out = append(out, cs[i].n)
	}
	return out
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
