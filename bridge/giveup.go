package bridge

import (
	"cmp"
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge/store"
)

// Giving up an overdue brief (issue 20: one fate). A brief into a pane
// whose receipt is overdue is either lost — its worker's gateway crashed
// between its ack and its queue — or still on its way: waiting in the
// worker's inbox behind a cut broker link, or typed with its receipt
// behind one. Its sender's gateway cannot tell these apart, and no clock
// can (hosts' clocks are skewed), so it does not decide: the worker's
// gateway, the one place that can type the brief, does. The sender's
// gateway sends it a GIVE_UP (control.<host>; its own decision when the
// worker is on this host), and the worker's gateway answers in one store
// transaction against its pane queue (store.GiveUp, store.ClaimAndQueue):
// a brief it queued is claimed and its queue settles it (typed: INJECTED,
// or FAILED), so the GIVE_UP is ignored; a brief it never queued is given
// up — its sender hears FAILED, with a dead-letter record, and the brief is
// never queued afterwards. Whichever comes first wins, and the other finds
// it decided. A sender's gateway that hears nothing asks again, backing
// off, and only past the brief's last chance — its expiresAt plus the skew
// allowance, InjectWait and ReceiptWait, when no gateway would type it any
// more — reports it FAILED on its own.

// GiveUpBody is the body of a GIVE_UP; corr is the brief's msgId. A
// GIVE_UP is never sealed (gateway to gateway, metadata only), so what
// crosses the broker holds no brief text: Excerpt is set only on the
// sender's own host (the worker on it), and from another host's gateway
// (older ones sent it) it is still read; without it the FAILED says
// "(its start not known)" and the sender's ledger has the excerpt.
type GiveUpBody struct {
	Target    string    `json:"target"`            // the worker's gid
	Sender    string    `json:"sender"`            // the brief's sender's gid
	Excerpt   string    `json:"excerpt,omitempty"` // never on the wire
	ExpiresAt time.Time `json:"expiresAt"`         // the brief's
}

// GivenUpMark opens the reason of the FAILED a worker's gateway answers a
// GIVE_UP with; a repeat of it, after the brief's fate is known, is dropped.
const GivenUpMark = "given up: "

// overdueKey is the seen-set key of a brief this gateway reported FAILED
// on its own past its last chance: a receipt that comes after all (a cut
// longer than the brief's life) is held for the sender, correcting it.
func overdueKey(msgID string) string { return "overdue:" + msgID }

// giveUpBackoffMax caps the doubling of the wait between two GIVE_UPs of
// one brief (a cut link that lasts hours asks a few dozen times).
const giveUpBackoffMax = 6

// lastChance is when no gateway types brief a any more: its expiry seen
// from a clock up to ClockSkew behind, plus typing and the receipt's way.
func (c *Core) lastChance(a store.Await) time.Time {
	return a.ExpiresAt.Add(c.cfg.ClockSkew + c.cfg.InjectWait + c.cfg.ReceiptWait)
}

// overdueBrief handles one brief past its deadline with no receipt held:
// true when it was reported FAILED here and now, by this gateway alone
// (the caller then takes it out of the ledger).
func (c *Core) overdueBrief(a store.Await, now time.Time) (failNow bool) {
	switch {
	case a.ExpiresAt.IsZero() || a.ToHost == "" || !now.Before(c.lastChance(a)):
		return true // an older record, or nothing can type it any more
	case a.ToHost == c.cfg.Host:
		if c.decideGiveUp(a.MsgID, a.TraceID, c.cfg.Host, giveUpOf(a)) == giveUpClaimed {
			c.ledger.later(a.MsgID, now.Add((c.cfg.InjectWait+c.cfg.ReceiptWait)<<min(a.Asks, giveUpBackoffMax)))
			c.ledger.queued(a.MsgID, c.cfg.ReceiptWait) // its queue settles it: wait until its expiry
			return false
		}
	case !c.takesGiveUps(a.ToHost):
		return true // a gateway older than GIVE_UP: as before
	default:
		c.askGiveUp(a)
	}
	c.ledger.later(a.MsgID, now.Add((c.cfg.InjectWait+c.cfg.ReceiptWait)<<min(a.Asks, giveUpBackoffMax)))
	return false
}

func giveUpOf(a store.Await) GiveUpBody {
	return GiveUpBody{Target: a.To, Sender: a.From, Excerpt: a.Excerpt, ExpiresAt: a.ExpiresAt}
}

// takesGiveUps reports whether host's gateway decides a GIVE_UP; a host
// not heard from gets one (it waits in its durable control queue).
func (c *Core) takesGiveUps(host string) bool {
	h := c.pres.host(host)
	return h == nil || h.p.GiveUps
}

// askGiveUp publishes a GIVE_UP of brief a to its worker's host. A publish
// that fails is asked again at the next deadline.
func (c *Core) askGiveUp(a store.Await) {
	ct, ok := c.tr.(ControlTransport)
	if !ok {
		return
	}
	b := giveUpOf(a)
	b.Excerpt = "" // the broker reads a GIVE_UP: no brief text in it
	raw, _ := json.Marshal(b)
	ttl := max(a.ExpiresAt.Add(c.cfg.ClockSkew).Sub(c.cfg.Now()), time.Second)
	n := c.newEnv(KindGiveUp, GatewayGID(c.cfg.Host), "control."+a.ToHost, raw, ttl)
	n.Corr, n.TraceID = a.MsgID, a.TraceID
	c.sign(n)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), c.cfg.MaxWait)
	defer cancel()
	if err := ct.PublishControl(ctx, a.ToHost, n); err != nil {
		c.log.Info("GIVE_UP of an overdue brief not sent: asked again later", LogMsgID, a.MsgID, LogTraceID, a.TraceID, "host", a.ToHost, "err", err)
		return
	}
	c.observeEnv(HopPublish, n, a.ToHost, "published")
	c.log.Info("no receipt within the bound: its worker's gateway is asked to give the brief up", LogMsgID, a.MsgID, LogTraceID, a.TraceID, "host", a.ToHost)
}

// runGiveUp decides a GIVE_UP another host's gateway sent, then marks it
// handled and acks it.
func (c *Core) runGiveUp(d Delivery) {
	defer c.wg.Done()
	env := d.Env
	var b GiveUpBody
	_ = json.Unmarshal(env.Body, &b) // checked by admitControl
	if on := c.mem.hostOf(b.Sender); on != "" && on != env.Host {
		c.log.Warn("GIVE_UP refused: its sender lives on another host", LogMsgID, env.MsgID, "corr", env.Corr, LogFrom, env.From, "sender", b.Sender, "on", on)
	} else {
		c.decideGiveUp(env.Corr, env.TraceID, env.Host, b) // undecided: its sender asks again
	}
	c.mem.markEnv("control:"+env.MsgID, env)
	if err := d.Acker.Ack(); err != nil {
		c.log.Warn("control message ack failed", LogKind, env.Kind, LogMsgID, env.MsgID, "err", err)
	}
}

// giveUpResult is what a worker's gateway decided about a GIVE_UP.
type giveUpResult int

const (
	giveUpUndecided giveUpResult = iota // the store failed: the sender asks again
	giveUpClaimed                       // queued here: its queue settles it
	giveUpGiven                         // never queued, never will be: its sender was told FAILED
)

// decideGiveUp is the worker's gateway's decision on the brief msgID from
// host's entity b.Sender to its worker b.Target: given up unless its pane
// queue took it first (one store transaction decides). A brief given up is
// reported once through reportUndelivered (the FAILED and the dead-letter
// record); a repeated GIVE_UP gets the FAILED again, since the first may
// not have reached the sender (its gateway drops a copy it does not await).
func (c *Core) decideGiveUp(msgID, traceID, host string, b GiveUpBody) giveUpResult {
	claimed, again, err := c.st.GiveUp(store.Claim{MsgID: msgID, Host: host, Until: b.ExpiresAt.Add(c.cfg.ClockSkew)})
	switch {
	case err != nil:
		c.log.Warn("cannot record an overdue brief as given up: decided later", LogMsgID, msgID, LogTraceID, traceID, "err", err)
		return giveUpUndecided
	case claimed:
		c.log.Info("GIVE_UP of a brief already queued here: its queue settles it", LogMsgID, msgID, LogTraceID, traceID, LogTo, b.Target)
		return giveUpClaimed
	}
	reason := GivenUpMark + "brief " + excerptOf(b.Excerpt) + " to " + cmp.Or(c.addrOf(b.Target), "its worker") + " was never typed and never will be: no receipt came within the bound, and " +
		c.cfg.Host + "'s gateway had not taken it from the inbox when its sender's gateway gave up on it (a broker link may have been cut, or the gateway crashed between taking and queueing it); send it again if it still matters"
	failedID := givenUpFailedID(c.cfg.Host, msgID)
	if again {
		o := c.notice(KindFailed, GatewayGID(c.cfg.Host), b.Sender, msgID, "", traceID, reason)
		o.env.MsgID = failedID
		c.publishAll([]outMsg{o})
		return giveUpGiven
	}
	c.log.Warn("overdue brief given up: never queued here, reported failed", LogMsgID, msgID, LogTraceID, traceID, LogFrom, b.Sender, LogTo, b.Target)
	c.reportUndelivered([]undelivered{{msgID: msgID, traceID: traceID, from: b.Sender, kind: KindSend, to: b.Target,
		queue: InboxQueueName(b.Target), cause: "not typed", reason: reason, failedID: failedID}})
	return giveUpGiven
}

// givenUpFailedNS derives a given-up FAILED's msgId (givenUpFailedID).
var givenUpFailedNS = uuid.MustParse("5b0f3c1e-8d2a-4e6b-9a47-2c61f0d9e8b3")

// givenUpFailedID is the msgId of every FAILED host's gateway writes
// giving up the brief briefMsgID: the first answer and each repeat are one
// notice, so a repeat reaching a sender that holds or drained the first is
// refused by its gateway as a copy (held set or seen-set, both kept across
// restarts). A repeat comes when the first may be lost, and when a ledger
// record outlived the first FAILED (a kill -9 right after the sweeper moved
// its deadline): after a restart, with the first drained, nothing else
// told the two apart (TestForwardCrashWindow: "reported twice").
func givenUpFailedID(host, briefMsgID string) string {
	return uuid.NewSHA1(givenUpFailedNS, []byte(host+"/"+briefMsgID)).String()
}

// excerptOf re-quotes an excerpt another gateway sent (bounded, quoted:
// sender-written text is data).
func excerptOf(q string) string {
	s, err := strconv.Unquote(q)
	if err != nil {
		return "(its start not known)"
	}
	return Excerpt(s)
}

// claimsPruneEvery is how often the sweeper deletes the give-up claims of
// briefs that can no longer arrive.
const claimsPruneEvery = 10 * time.Minute

// pruneClaims is the sweeper's part for the claims (one scan of the
// bucket, every claimsPruneEvery).
func (c *Core) pruneClaims(now time.Time) {
	if now.Sub(c.claimsPruned) < claimsPruneEvery {
		return
	}
	c.claimsPruned = now
	if n, err := c.st.PruneClaims(now); err != nil {
		c.log.Warn("cannot prune the give-up claims", "err", err)
	} else if n > 0 {
		c.log.Debug("give-up claims pruned", "n", n)
	}
}
