package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Tracing a conversation across hosts: this gateway reads its own audit
// log (tracescan.go) and asks every other host in presence for theirs with
// a TRACE on control.<host>, signed like everything it publishes. Each
// answers a TRACE_ANSWER (corr the TRACE) on the asker's control queue:
// the hops it found, metadata only. A host that does not answer within the
// bound is reported as such; a trace never waits longer.

// TraceWait is how long a trace waits for the other hosts' answers by
// default.
const TraceWait = 5 * time.Second

// traceTTL is the lifetime of a TRACE and its answer: a host that was down
// does not answer a stale request when it comes back (beyond the
// clock-skew allowance), and a late answer finds no one waiting.
const traceTTL = time.Minute

// TraceHost is what one gateway found for a trace.
type TraceHost struct {
	Host      string        `json:"host"`
	Hops      []AuditRecord `json:"hops"`
	Scope     TraceScope    `json:"scope"`
	Truncated bool          `json:"truncated,omitempty"` // more than TraceMaxHops matched: the earliest are listed
	// Error says why this host shows nothing: it did not answer in time,
	// could not be asked, or could not read its log.
	Error string `json:"error,omitempty"`
}

// TraceReport is the hops of one traceId or msgId on every host that
// answered, each host's times as its clock gave them.
type TraceReport struct {
	ID    string      `json:"id"`
	Hosts []TraceHost `json:"hosts"` // this host first, then the others by name
	// Names are the entities this gateway knows, by gid: name@host (a
	// gateway itself is gateway@host).
	Names map[string]string `json:"names,omitempty"`
}

// Found counts the hops found on every host.
func (r *TraceReport) Found() int {
	n := 0
	for _, h := range r.Hosts {
		n += len(h.Hops)
	}
	return n
}

// traceWaits are the TRACEs this gateway waits answers for, by msgId. Its
// lock is a leaf.
type traceWaits struct {
	mu leafMutex
	m  map[string]traceWait
}

type traceWait struct {
	host string
	ch   chan TraceHost // buffered 1: the one answer
}

func (t *traceWaits) add(msgID, host string) chan TraceHost {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]traceWait{}
	}
	ch := make(chan TraceHost, 1)
	t.m[msgID] = traceWait{host: host, ch: ch}
	return ch
}

func (t *traceWaits) drop(msgID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, msgID)
}

// answer hands th, from host, to whoever waits on the TRACE corr; errNotAsked
// when host was not asked that, false when no one waits (any more).
func (t *traceWaits) answer(corr, host string, th TraceHost) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	w, ok := t.m[corr]
	if !ok {
		return false, nil
	}
	if w.host != host {
		return false, errNotAsked
	}
	delete(t.m, corr)
	w.ch <- th
	return true, nil
}

var errNotAsked = errors.New("a TRACE_ANSWER from a host that was not asked that TRACE")

// Trace lists the hops of id (a traceId or msgId) from this gateway's
// audit log and from every other host in presence that answers within
// wait (TraceWait if zero, capped at MaxWait).
func (c *Core) Trace(ctx context.Context, id string, wait time.Duration) (*TraceReport, error) {
	u, err := uuid.Parse(id)
	if err != nil || len(id) != 36 {
		return nil, userErr("%s is not a traceId or msgId (a UUID like 3f1a0c9e-5b6d-4e7f-8a9b-0c1d2e3f4a5b)", Clip(id))
	}
	id = u.String()
	if wait <= 0 {
		wait = TraceWait
	}
	ctx, cancel := context.WithTimeout(ctx, min(wait, c.cfg.MaxWait))
	defer cancel()
	asked := c.askTraces(ctx, id)
	rep := &TraceReport{ID: id, Hosts: []TraceHost{c.traceLocal(ctx, id)}}
	for _, a := range asked {
		rep.Hosts = append(rep.Hosts, a.collect(ctx, c, wait))
	}
	rep.Names = c.traceNames(rep)
	return rep, nil
}

// traceLocal reads id's hops from this gateway's audit log.
func (c *Core) traceLocal(ctx context.Context, id string) TraceHost {
	th := TraceHost{Host: c.cfg.Host, Hops: []AuditRecord{}}
	if c.cfg.Audit == nil {
		th.Error = "this gateway keeps no audit log"
		return th
	}
	c.cfg.Audit.Flush(ctx) // the hops of the last audit.FlushEvery too
	hops, scope, truncated, err := scanAudit(c.cfg.Audit.Path(), id, TraceWindow)
	if err != nil {
		th.Error = err.Error()
		return th
	}
	th.Hops, th.Scope, th.Truncated = append(th.Hops, hops...), scope, truncated
	return th
}

// askedTrace is one host asked for a trace: its answer comes on ch, or it
// could not be asked (err).
type askedTrace struct {
	host  string
	msgID string
	ch    chan TraceHost
	err   error
}

// askTraces publishes a TRACE of id to every other host in presence.
func (c *Core) askTraces(ctx context.Context, id string) []*askedTrace {
	ct, ok := c.tr.(ControlTransport)
	if !ok {
		return nil // one host: nobody else to ask
	}
	raw, _ := json.Marshal(TraceRequest{ID: id})
	var asked []*askedTrace
	for _, host := range c.pres.hostIDs() {
		env := c.newEnv(KindTrace, GatewayGID(c.cfg.Host), "control."+host, raw, traceTTL)
		a := &askedTrace{host: host, msgID: env.MsgID, ch: c.traces.add(env.MsgID, host)}
		c.sign(env)
		if err := ct.PublishControl(ctx, host, env); err != nil {
			a.err = err
			c.observeEnv(HopPublish, env, host, "publish failed: "+err.Error())
		} else {
			c.observeEnv(HopPublish, env, host, "published")
		}
		asked = append(asked, a)
	}
	return asked
}

// collect waits for a's answer until ctx ends.
func (a *askedTrace) collect(ctx context.Context, c *Core, wait time.Duration) TraceHost {
	defer c.traces.drop(a.msgID)
	if a.err != nil {
		return TraceHost{Host: a.host, Hops: []AuditRecord{}, Error: "not asked: " + a.err.Error()}
	}
	select {
	case th := <-a.ch:
		th.Host = a.host
		return th
	case <-ctx.Done():
		return TraceHost{Host: a.host, Hops: []AuditRecord{}, Error: fmt.Sprintf(
			"no answer within %v (its gateway is down or older than this one, or it does not trust %s: `herdbridge keys trust` on it)", wait, c.cfg.Host)}
	}
}

// hostIDs lists the other hosts in presence, by name.
func (p *presence) hostIDs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := map[string]bool{}
	for h := range p.hosts {
		seen[h] = true
	}
	for _, r := range p.remote {
		seen[r.p.Host] = true
	}
	hosts := make([]string, 0, len(seen))
	for h := range seen {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	return hosts
}

// traceNames names the gids of rep's hops this gateway knows.
func (c *Core) traceNames(rep *TraceReport) map[string]string {
	names := map[string]string{}
	gateways := map[string]string{}
	for _, h := range rep.Hosts {
		gateways[GatewayGID(h.Host)] = "gateway@" + h.Host
	}
	for _, h := range rep.Hosts {
		for _, r := range h.Hops {
			for _, gid := range []string{r.From, r.To, r.Entity} {
				if _, done := names[gid]; done || gid == "" {
					continue
				}
				if n := gateways[gid]; n != "" {
					names[gid] = n
				} else if n := c.addrOf(gid); n != "" {
					names[gid] = n
				}
			}
		}
	}
	return names
}

// isTraceKind reports whether k is a TRACE or its answer.
func isTraceKind(k Kind) bool { return k == KindTrace || k == KindTraceAnswer }

// gatewayToErr is verify's to check of a gateway-to-gateway exchange on
// control.<host>: a request (TRACE, PRESENCE_ASK) to control.<this host>,
// its answer kind (TRACE_ANSWER, PRESENCE_SNAPSHOT) to this host's gateway.
func (c *Core) gatewayToErr(d Delivery, answer Kind) func(*Envelope) string {
	return func(env *Envelope) string {
		want := "control." + c.cfg.Host
		if env.Kind == answer {
			want = GatewayGID(c.cfg.Host)
		}
		if env.To != want || d.Key != "" && d.Key != c.cfg.Host {
			return string(env.Kind) + " to " + env.To + " with routing key " + d.Key + " on " + c.cfg.Host
		}
		return ""
	}
}

// onTraceControl handles a TRACE or TRACE_ANSWER on control.<host>: both
// verified like any control message (an untrusted host is refused), both
// only from the sending host's gateway itself.
func (c *Core) onTraceControl(d Delivery) {
	env := d.Env
	where := "control." + c.cfg.Host
	reason, detail, _ := c.verify(d, c.gatewayToErr(d, KindTraceAnswer))
	if reason == "" && env.From != GatewayGID(env.Host) {
		reason, detail = RefuseFromNotOnHost, "a "+string(env.Kind)+" from "+Clip(env.From)+", not from the gateway of "+env.Host
	}
	if reason == "" && env.Kind == KindTrace && c.mem.has("control:"+env.MsgID) {
		if d.Redelivered { // answered and marked, its ack lost: benign
			_ = d.Acker.Ack()
			return
		}
		reason, detail = RefuseReplayed, "TRACE msgId already handled"
	}
	var req TraceRequest
	var ans TraceHost
	var err error
	if reason == "" && env.Kind == KindTrace {
		req, err = ParseTraceRequest(env.Body)
	} else if reason == "" {
		ans, err = ParseTraceAnswer(env.Body)
	}
	if err != nil {
		reason, detail = RefuseMalformed, err.Error()
	}
	if reason != "" {
		c.refuse(d, where, reason, detail)
		return
	}
	c.observeEnv(HopAccept, env, d.Key, "accepted")
	if env.Kind == KindTraceAnswer {
		c.takeTraceAnswer(d, ans)
		return
	}
	c.wg.Add(1)
	go c.answerTrace(d, req)
}

// takeTraceAnswer hands an answer to the trace waiting for it; one that
// comes after its trace gave up is dropped.
func (c *Core) takeTraceAnswer(d Delivery, ans TraceHost) {
	taken, err := c.traces.answer(d.Env.Corr, d.Env.Host, ans)
	if err != nil {
		c.refuse(d, "control."+c.cfg.Host, RefuseToMismatch, err.Error())
		return
	}
	if !taken {
		c.log.Debug("trace answer after its trace ended: dropped", LogMsgID, d.Env.MsgID, "corr", d.Env.Corr, "host", d.Env.Host)
	}
	if err := d.Acker.Ack(); err != nil {
		c.log.Warn("TRACE_ANSWER ack failed", LogMsgID, d.Env.MsgID, "err", err)
	}
}

// answerTrace reads the asked id's hops from this gateway's audit log and
// publishes them to the asking host's control queue, then acks the TRACE.
func (c *Core) answerTrace(d Delivery, req TraceRequest) {
	defer c.wg.Done()
	env := d.Env
	ctx, cancel := context.WithTimeout(c.ctx, traceTTL) // a gateway stopping answers no more
	defer cancel()
	th := c.traceLocal(ctx, req.ID)
	th.Host = ""
	raw := traceAnswerBody(&th)
	ans := c.newEnv(KindTraceAnswer, GatewayGID(c.cfg.Host), GatewayGID(env.Host), raw, traceTTL)
	ans.Corr = env.MsgID
	c.sign(ans)
	status := "published"
	if ct, ok := c.tr.(ControlTransport); !ok {
		status = "publish failed: no control plane"
	} else if err := ct.PublishControl(ctx, env.Host, ans); err != nil {
		status = "publish failed: " + err.Error()
	}
	c.observeEnv(HopPublish, ans, env.Host, status)
	c.log.Info("trace answered", LogMsgID, env.MsgID, "host", env.Host, "hops", len(th.Hops), "bytes", len(raw), "status", status)
	c.mem.markEnv("control:"+env.MsgID, env)
	if err := d.Acker.Ack(); err != nil {
		c.log.Warn("TRACE ack failed", LogMsgID, env.MsgID, "err", err)
	}
}

// traceAnswerBody is th as an answer's body, its hops halved until it fits
// in MaxBodyBytes (marked truncated).
func traceAnswerBody(th *TraceHost) []byte {
	for {
		raw, err := json.Marshal(th)
		if err == nil && len(raw) <= MaxBodyBytes || len(th.Hops) == 0 {
			return raw
		}
		th.Hops, th.Truncated = th.Hops[:len(th.Hops)/2], true
	}
}

// traceHint is the message of a trace that found nothing.
func traceHint(rep *TraceReport) string {
	var where []string
	for _, h := range rep.Hosts {
		switch {
		case h.Error != "":
			where = append(where, h.Host+" ("+h.Error+")")
		case h.Scope.Whole:
			where = append(where, h.Host+" (its whole audit log, "+strings.Join(h.Scope.Files, ", ")+")")
		default:
			where = append(where, fmt.Sprintf("%s (the last %d bytes of %s, back to %s)", h.Host, h.Scope.Bytes,
				strings.Join(h.Scope.Files, ", "), h.Scope.Since.UTC().Format(time.RFC3339)))
		}
	}
	return "no hops found for " + rep.ID + " (searched " + strings.Join(where, "; ") + ")"
}

// NotFound is the error of a trace that found no hop anywhere, saying
// where it looked; nil when it found some.
func (r *TraceReport) NotFound() error {
	if r.Found() > 0 {
		return nil
	}
	return errors.New(traceHint(r))
}
