package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"
	"unicode"
)

// Control across hosts. Every gateway consumes one control queue,
// control.<host>, whose dispatcher (onControl) hands each kind to its
// runner: a SPAWN (spawnremote.go), a STOP or an INTERRUPT
// (runRemoteControl, below), a DEAD_LETTER notice (deadnotice.go), a
// GIVE_UP (giveup.go), a TRACE or its answer (trace.go).
//
// Lifecycle control: bridge_stop and bridge_interrupt of a worker on
// another host go to that host's control queue as a STOP or an INTERRUPT,
// signed by the caller's gateway like a SPAWN. The worker's gateway judges
// the caller again (its role from signed presence: a worker may act only
// on itself), acts, and answers with an INJECTED in the worker's name
// whose body is "<status>: <reason>" (stopped, interrupted, uncertain, …)
// or a FAILED saying why not. A STOP carries its stop id, which the
// worker's gateway remembers: a STOP redelivered or retried after it was
// carried out stops nothing twice.
//
// Neither is spooled while the broker is unreachable: a stop or an
// interrupt that lands minutes later than meant could end work the caller
// no longer wants ended, so the call fails at once and says to call again.

// StopBody is the body of a STOP.
type StopBody struct {
	Target    string `json:"target"` // the worker's gid
	StopID    string `json:"stopId"`
	Reason    string `json:"reason,omitempty"`
	ClosePane *bool  `json:"closePane,omitempty"`
}

// InterruptBody is the body of an INTERRUPT.
type InterruptBody struct {
	Target string `json:"target"` // the worker's gid
	// Next: a brief with priority next follows; the worker's pane queue
	// types nothing else until it is typed (or a bound passes).
	Next bool `json:"next,omitempty"`
}

// controlTTL bounds how long a STOP or INTERRUPT may wait in its control
// queue: one that waited longer acts on a situation its caller has left.
const controlTTL = 2 * time.Minute

// stopRemote sends a STOP for target to its host and waits for the answer.
func (c *Core) stopRemote(ctx context.Context, st *entState, target Entity, req StopRequest) (*Result, error) {
	body := StopBody{Target: target.GID, StopID: req.StopID, Reason: req.Reason, ClosePane: req.ClosePane}
	res, err := c.controlCall(ctx, st, target, KindStop, body)
	if err != nil {
		return nil, err
	}
	switch res.Status {
	case StatusPending:
		res.Next = "bridge_roster shows whether " + target.Addr() + " is gone; call bridge_stop again with stop_id " + req.StopID + " to ask once more (it never stops twice)"
	case StatusStopped: // a retry here answers at once, even after the worker left the roster
		c.mem.mark(stopKey(req.StopID), c.cfg.Now().Add(stopMemory))
	}
	return res, nil
}

// controlCall publishes a signed control message of kind about target to
// target's host and waits (up to MaxWait) for its INJECTED or FAILED.
func (c *Core) controlCall(ctx context.Context, st *entState, target Entity, kind Kind, body any) (*Result, error) {
	ct, ok := c.tr.(ControlTransport)
	if !ok {
		return nil, userErr("%s is on host %s, which this gateway reaches only through a broker: it runs the embedded transport (this host only)", target.Addr(), target.Host)
	}
	raw, _ := json.Marshal(body)
	env := c.newEnv(kind, st.GID, "control."+target.Host, raw, controlTTL)
	receipts, done := st.expectReceipt(env.MsgID)
	defer done()
	wire, err := c.sealAndSign(env)
	if err != nil {
		return nil, err
	}
	c.observeEnv(HopPublish, env, target.Host, "published")
	what := strings.ToLower(string(kind))
	if err := ct.PublishControl(ctx, target.Host, wire); err != nil {
		if errors.Is(err, ErrUnavailable) {
			return nil, userErr("%s of %s not sent: the broker is unreachable (%v). A %s is not spooled, since one arriving later could act on work you no longer mean: call again once the broker is back", what, target.Addr(), err, what)
		}
		return nil, userErr("%s of %s: %v", what, target.Addr(), err)
	}
	res := &Result{Status: StatusPending, MsgID: env.MsgID, Target: target.Addr(),
		Reason: "no answer from " + target.Host + " yet: its gateway may be slow or down (the " + what + " waits in its control queue for " + controlTTL.String() + ")"}
	var refused error
	onReceipt := func(r *Envelope) bool {
		switch r.Kind {
		case KindFailed:
			refused = userErr("%s", oneLine(string(r.Body)))
			return true
		case KindInjected:
			res.Status, res.Reason = controlAnswer(target.Host, string(r.Body))
			return true
		}
		return false
	}
	if _, err := c.await(ctx, waitSpec{st: st, d: c.maxWait(ctx), receipts: receipts, onReceipt: onReceipt, what: "waiting for " + target.Host + " to " + what + " " + target.Name}); err != nil {
		return nil, err
	}
	if refused != nil {
		return nil, refused
	}
	return res, nil
}

// onControl is the dispatcher of control.<host>: a SPAWN runs the local
// spawn (spawnremote.go), a STOP or INTERRUPT acts on a local worker
// (runRemoteControl), each on its own goroutine, then is acked; a failure
// goes back to the caller as FAILED (corr = the control message). A
// spawn's success needs no message: the new worker shows up in the
// roster. A DEAD_LETTER is another gateway's word that one of this host's
// messages died (deadnotice.go); a GIVE_UP asks this host to decide an
// overdue brief's fate (giveup.go). A TRACE or its answer goes to
// onTraceControl.
func (c *Core) onControl(d Delivery) {
	if d.Env != nil && isTraceKind(d.Env.Kind) {
		c.onTraceControl(d) // trace.go
		return
	}
	if d.Env != nil && isPresenceSyncKind(d.Env.Kind) {
		c.onPresenceSync(d) // presenceask.go
		return
	}
	if !c.admitControl(d) {
		return
	}
	c.observeEnv(HopAccept, d.Env, d.Key, "accepted")
	c.wg.Add(1)
	switch d.Env.Kind {
	case KindStop, KindInterrupt:
		go c.runRemoteControl(d)
	case KindDeadLetter:
		go c.runDeadLetterNotice(d) // deadnotice.go
	case KindGiveUp:
		go c.runGiveUp(d) // giveup.go
	default:
		go c.runRemoteSpawn(d) // spawnremote.go
	}
}

// admitControl verifies a control delivery and checks its body; false
// when it was refused, is a benign redelivery, or waits for presence.
func (c *Core) admitControl(d Delivery) bool {
	where := "control." + c.cfg.Host
	reason, detail, wait := c.verify(d, func(env *Envelope) string {
		if env.To != "control."+c.cfg.Host || d.Key != "" && d.Key != c.cfg.Host {
			return string(env.Kind) + " to " + env.To + " with routing key " + d.Key + " on " + c.cfg.Host
		}
		return ""
	})
	if wait {
		c.waitForPresence(d, where, "control:"+d.Env.MsgID, c.onControl)
		return false
	}
	if reason == "" && !controlKinds[d.Env.Kind] {
		reason, detail = RefuseBadKind, "a "+string(d.Env.Kind)+" on the control queue"
	}
	if reason == "" && c.mem.has("control:"+d.Env.MsgID) {
		if d.Redelivered { // handled and marked, its ack lost: benign
			_ = d.Acker.Ack()
			return false
		}
		reason, detail = RefuseReplayed, string(d.Env.Kind)+" msgId already handled"
	}
	if reason == "" && !controlBodyOK(d.Env) {
		reason, detail = RefuseMalformed, "bad "+string(d.Env.Kind)+" body"
	}
	if reason != "" {
		c.refuse(d, where, reason, detail)
		return false
	}
	return true
}

// controlBodyOK checks that a control message's body decodes and names
// what it acts on.
func controlBodyOK(env *Envelope) bool {
	switch env.Kind {
	case KindStop:
		var b StopBody
		return json.Unmarshal(env.Body, &b) == nil && isUUID(b.Target) && isUUID(b.StopID)
	case KindInterrupt:
		var b InterruptBody
		return json.Unmarshal(env.Body, &b) == nil && isUUID(b.Target)
	case KindDeadLetter:
		_, _, err := ParseDeadLetterNotice(env.Body)
		return err == nil
	case KindGiveUp:
		var b GiveUpBody
		return env.From == GatewayGID(env.Host) && json.Unmarshal(env.Body, &b) == nil && isUUID(b.Target) && isUUID(b.Sender)
	}
	var b SpawnBody
	return json.Unmarshal(env.Body, &b) == nil && b.Profile != ""
}

// remoteCaller is the entity on another host a control message comes
// from, as its signed presence shows it; false when it has none (then it
// may act on nothing here).
func (c *Core) remoteCaller(env *Envelope) (Entity, bool) {
	r := c.pres.entry(env.From)
	if r == nil || r.p.Host != env.Host {
		return Entity{}, false
	}
	return r.entity(), true
}

// controlTarget is the local worker a control message acts on, checked
// against its caller's rights.
func (c *Core) controlTarget(env *Envelope, gid, what string) (caller Entity, target *entState, err error) {
	caller, ok := c.remoteCaller(env)
	if !ok {
		return Entity{}, nil, errors.New("refused: the caller " + env.From + " has no signed presence on " + env.Host)
	}
	target = c.reg.get(gid)
	if target == nil {
		return caller, nil, errors.New("no worker " + gid + " on " + c.cfg.Host + ": it was stopped or removed already")
	}
	if err := mayControl(what, caller, target.view()); err != nil {
		return caller, nil, err
	}
	return caller, target, nil
}

// controlAction is a STOP or an INTERRUPT from another host, decoded: the
// local worker it acts on, the tool whose rights its caller must hold here
// (mayControl), and what it does.
type controlAction struct {
	target string // the worker's gid
	tool   string // bridge_stop or bridge_interrupt
	// early, when set, may answer before the caller and the worker are
	// looked up: a result or an error ends the action there.
	early func() (*Result, error)
	act   func(ctx context.Context, caller Entity, target *entState) (*Result, error)
}

// runRemoteControl carries out a STOP or an INTERRUPT another host sent,
// answers it, marks it handled and acks it (answerControl).
func (c *Core) runRemoteControl(d Delivery) {
	defer c.wg.Done()
	var a controlAction
	if d.Env.Kind == KindStop {
		a = c.remoteStop(d.Env)
	} else {
		a = c.remoteInterrupt(d.Env)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), time.Minute)
	defer cancel()
	var res *Result
	var err error
	if a.early != nil {
		res, err = a.early()
	}
	if res == nil && err == nil {
		var caller Entity
		var target *entState
		if caller, target, err = c.controlTarget(d.Env, a.target, a.tool); err == nil {
			res, err = a.act(ctx, caller, target)
		}
	}
	c.answerControl(d, a.target, res, err)
}

// remoteStop is the action of a STOP (its body checked by admitControl).
// It differs from an INTERRUPT's in its early step, on purpose: a STOP's
// reason is text its caller wrote, checked as a local bridge_stop's is;
// and a STOP whose stop id was carried out already answers stopped before
// its caller and worker are looked up — by then the worker is gone (the
// lookup would answer "no worker"), and a retried stop must hear that it
// worked, never stop twice. An INTERRUPT has no text and no id beyond its
// msgId, whose replay admitControl refuses.
func (c *Core) remoteStop(env *Envelope) controlAction {
	var body StopBody
	_ = json.Unmarshal(env.Body, &body)
	req := StopRequest{Target: body.Target, Reason: body.Reason, ClosePane: body.ClosePane, StopID: body.StopID}
	return controlAction{target: body.Target, tool: "bridge_stop",
		early: func() (*Result, error) {
			if body.Reason != "" {
				if err := checkText("reason", body.Reason); err != nil {
					return nil, err
				}
			}
			if c.mem.has(stopKey(body.StopID)) {
				return stoppedBefore(StopRequest{Target: body.Target, StopID: body.StopID}), nil
			}
			return nil, nil
		},
		act: func(ctx context.Context, caller Entity, _ *entState) (*Result, error) {
			return c.stopLocal(ctx, caller.Addr(), body.Target, req)
		}}
}

// remoteInterrupt is the action of an INTERRUPT (its body checked by
// admitControl): Escape in the worker's pane, its queue held for the
// message to come when the caller sends one (body.Next).
func (c *Core) remoteInterrupt(env *Envelope) controlAction {
	var body InterruptBody
	_ = json.Unmarshal(env.Body, &body)
	return controlAction{target: body.Target, tool: "bridge_interrupt",
		act: func(ctx context.Context, _ Entity, target *entState) (*Result, error) {
			return c.interruptLocal(ctx, target.view(), body.Next)
		}}
}

// answerControl tells a control message's caller how it ended, marks it
// handled and acks it: an INJECTED "<status>: <reason>" in the name of the
// worker it acted on (worker, whose binding to this host outlives its
// removal), or a FAILED with the error from the gateway itself (the one
// kind a gateway speaks for itself: verify.go).
func (c *Core) answerControl(d Delivery, worker string, res *Result, err error) {
	env := d.Env
	from, kind, body := GatewayGID(c.cfg.Host), KindFailed, ""
	if err != nil {
		body = err.Error()
		c.log.Warn("remote control refused or failed", LogKind, env.Kind, LogMsgID, env.MsgID, LogFrom, env.From, LogReason, body)
	} else {
		from, kind, body = worker, KindInjected, res.Status+": "+res.Reason
		c.log.Info("remote control done", LogKind, env.Kind, LogMsgID, env.MsgID, LogFrom, env.From, "status", res.Status)
	}
	c.publishAll([]outMsg{c.receiptFor(kind, from, env, body)})
	c.mem.markEnv("control:"+env.MsgID, env)
	if err := d.Acker.Ack(); err != nil {
		c.log.Warn("control message ack failed", LogKind, env.Kind, LogMsgID, env.MsgID, "err", err)
	}
}

// controlStatuses are the statuses a stop or an interrupt ends with.
var controlStatuses = map[string]bool{StatusStopped: true, StatusInterrupted: true, StatusUncertain: true, StatusNotWorking: true, StatusFailed: true}

// controlAnswer is the status and reason of host's INJECTED answer to a
// control message ("<status>: <reason>"). It is another gateway's text,
// and a gateway of the trust circle can write anything there: a status
// that is not one a stop or an interrupt ends with reads as uncertain, and
// the reason is kept on one line, so the answer cannot add lines (a fake
// status, a next step) to the caller's result.
func controlAnswer(host, body string) (status, reason string) {
	status, reason, _ = strings.Cut(body, ": ")
	if !controlStatuses[status] {
		return StatusUncertain, "the gateway of " + host + " answered with a status this gateway does not know: " + Clip(body)
	}
	return status, oneLine(reason)
}

// oneLine is s with every control character and line or paragraph
// separator replaced by a space.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, s)
}
