package loadtest

import (
	"fmt"
	"regexp"
	"sort"
	"sync"
	"time"
)

// Kind is a kind of traffic the ledger accounts for.
type Kind string

// The kinds of traffic.
const (
	KindBrief     Kind = "brief"      // primary → worker that pulls (bridge_poll)
	KindPaneBrief Kind = "pane-brief" // primary → worker in a herdr pane (forward path, at-most-once)
	KindReply     Kind = "reply"      // worker → primary
	KindAsk       Kind = "ask"        // worker → primary (bridge_ask)
	KindAnswer    Kind = "answer"     // primary → asking worker (bridge_send turn_id)
	KindBroadcast Kind = "broadcast"  // primary → a group, one copy per member
	// Calls that carry no message: only their latency and errors count.
	KindPoll   Kind = "poll"   // a primary's bridge_poll filtered on one worker
	KindRoster Kind = "roster" // one bridge_roster call (the load tool's --register)
)

// Kinds are the kinds of messages, in report order.
var Kinds = []Kind{KindBrief, KindPaneBrief, KindReply, KindAsk, KindAnswer, KindBroadcast}

// accepted are the statuses by which the fabric took a message: it must
// then be delivered, exactly once, or its loss explained by the product
// (a FAILED receipt, an `uncertain` forward).
var accepted = map[Kind]map[string]bool{
	KindBrief:     {"confirmed": true, "queued": true, "replied": true, "pending": true, "asked": true},
	KindPaneBrief: {"submitted": true, "uncertain": true, "queued": true, "confirmed": true},
	KindReply:     {"confirmed": true, "queued": true},
	KindAsk:       {"answered": true, "no_waiter": true, "expired": true, "pending": true},
	KindAnswer:    {"delivered": true},
	KindBroadcast: {"confirmed": true, "queued": true},
}

// tagRE finds a ledger tag in a body or a typed prompt: "soak KIND TAG".
var tagRE = regexp.MustCompile(`soak [a-z-]+ (sk-[0-9]+)`)

// TagOf is the tag a body carries ("" if none).
func TagOf(body string) string {
	m := tagRE.FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return m[1]
}

// Clock counts the kills of each host's gateway: started is raised just
// before a kill, done once the process is gone. A delivery samples both,
// which is how a duplicate is told to be the documented redelivery after
// a crash (a kill between the two copies) without looking at wall time.
type Clock struct {
	mu            sync.Mutex
	started, done map[string]int
}

// NewClock is a clock with no kills.
func NewClock() *Clock { return &Clock{started: map[string]int{}, done: map[string]int{}} }

// Killing is called just before host's gateway is killed.
func (c *Clock) Killing(host string) { c.mu.Lock(); c.started[host]++; c.mu.Unlock() }

// Killed is called once host's killed gateway process is gone.
func (c *Clock) Killed(host string) { c.mu.Lock(); c.done[host]++; c.mu.Unlock() }

// Mark is host's kill counts at one moment.
type Mark struct{ Started, Done int }

// Now is host's kill counts now.
func (c *Clock) Now(host string) Mark {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Mark{c.started[host], c.done[host]}
}

// killBetween: a kill of the host began after a (whose killed process had
// been gone at a) and before b.
func killBetween(a, b Mark) bool { return b.Started > a.Done }

// Send is one message the driver sent (one tag; a broadcast has several
// recipients).
type Send struct {
	Tag      string
	Kind     Kind
	From     string   // sender's address
	To       []string // recipients' addresses
	Start    time.Time
	CallTime time.Duration
	Status   string
	MsgID    string
	Err      string
	// Straddled: the sender's gateway was killed while the call was open,
	// so a retry may publish again (SPEC's one-state-write window).
	Straddled bool
	startMark Mark
	done      bool
}

type delivery struct {
	at   time.Time
	mark Mark // of the recipient's host, at reception
}

// Ledger accounts for every message by its tag.
type Ledger struct {
	clock *Clock
	mu    sync.Mutex
	seq   int
	sends map[string]*Send
	got   map[string]map[string][]delivery // tag → recipient → copies
	// receipts by the msgId they are about (corr): "FAILED: reason"
	receipts map[string][]string
	untagged int // deliveries of kinds that carry tags, without one
	plain    map[Kind]*plainCalls
	// receiveFailed: the receiving loops' polls that failed (a tool error,
	// the gateway away); callErrs the first failed calls that carry no
	// message (those and plain calls)
	receiveFailed int
	callErrs      []string
}

// NewLedger is an empty ledger on clock.
func NewLedger(clock *Clock) *Ledger {
	return &Ledger{clock: clock, sends: map[string]*Send{}, got: map[string]map[string][]delivery{}, receipts: map[string][]string{},
		plain: map[Kind]*plainCalls{}}
}

// Begin records a send about to be made from (an address on fromHost) to
// the recipients, and returns it with a fresh tag.
func (l *Ledger) Begin(kind Kind, from, fromHost string, to []string) *Send {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	s := &Send{Tag: fmt.Sprintf("sk-%07d", l.seq), Kind: kind, From: from, To: to, Start: time.Now(),
		startMark: l.clock.Now(fromHost)}
	l.sends[s.Tag] = s
	return s
}

// End records the outcome of s's call (err: the call never returned one).
func (l *Ledger) End(s *Send, fromHost string, r Result, err error) {
	end := l.clock.Now(fromHost)
	l.mu.Lock()
	defer l.mu.Unlock()
	s.CallTime = time.Since(s.Start)
	s.Straddled = killBetween(s.startMark, end)
	s.done = true
	switch {
	case err != nil:
		s.Err = err.Error()
	case r.IsError:
		s.Err = r.Text
	default:
		s.Status, s.MsgID = r.Status, r.MsgID
	}
}

// Delivered records that recipient (on host) got tag's message.
func (l *Ledger) Delivered(tag, recipient, host string) {
	d := delivery{at: time.Now(), mark: l.clock.Now(host)}
	l.mu.Lock()
	defer l.mu.Unlock()
	if tag == "" {
		l.untagged++
		return
	}
	m := l.got[tag]
	if m == nil {
		m = map[string][]delivery{}
		l.got[tag] = m
	}
	m[recipient] = append(m[recipient], d)
}

// Receipt records a receipt (FAILED, INJECTED, …) about msgID.
func (l *Ledger) Receipt(msgID, kind, body string) {
	if msgID == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.receipts[msgID] = append(l.receipts[msgID], kind+": "+body)
}

// explained says why s's missing copy is no loss: the product reported
// it (FAILED to the sender; a forward it could not confirm, `uncertain`),
// or the ask ended before reaching anyone. "" if nothing explains it.
func (l *Ledger) explained(s *Send) string {
	if s.Status == "uncertain" {
		return "forward reported uncertain"
	}
	for _, r := range l.receipts[s.MsgID] {
		if len(r) >= 6 && r[:6] == "FAILED" {
			return "FAILED receipt: " + clip(r, 120)
		}
		if len(r) >= 19 && r[:19] == "INJECTED: uncertain" {
			return "forward reported uncertain (late)"
		}
	}
	return ""
}

// Outstanding is how many accepted copies are neither delivered nor
// explained yet (the drain waits for 0), and how many sends have no
// outcome yet.
func (l *Ledger) Outstanding() (copies, open int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.sends {
		if !s.done {
			open++
			continue
		}
		if !accepted[s.Kind][s.Status] {
			continue
		}
		for _, to := range s.To {
			if len(l.got[s.Tag][to]) == 0 && l.explained(s) == "" {
				copies++
			}
		}
	}
	return copies, open
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// sortedSends is every send in tag order.
func (l *Ledger) sortedSends() []*Send {
	out := make([]*Send, 0, len(l.sends))
	for _, s := range l.sends {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tag < out[j].Tag })
	return out
}
