package loadtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// body is a message carrying tag, and whom to reply to.
func body(kind Kind, tag, replyTo string) string {
	return fmt.Sprintf("soak %s %s reply-to %s", kind, tag, replyTo)
}

// replyToOf is the address a body asks to reply to.
func replyToOf(b string) string {
	_, after, ok := strings.Cut(b, " reply-to ")
	if !ok {
		return ""
	}
	return strings.Fields(after + " ")[0]
}

// send makes one accounted call of tool from a; args get the message
// (under msgKey) and a request_id (the tag), so a retry publishes nothing
// twice.
func (e *Engine) send(ctx context.Context, a *Agent, kind Kind, to []string, tool, msgKey string, args map[string]any) (Result, bool) {
	s := e.Ledger.Begin(kind, a.Addr(), a.Host, to)
	args[msgKey] = body(kind, s.Tag, a.Addr())
	args["request_id"] = s.Tag
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.RetryFor)
	defer cancel()
	r, err := a.Call(cctx, tool, args, callTimeout)
	e.Ledger.End(s, a.Host, r, err)
	return r, err == nil && !r.IsError
}

// primaryLoop: briefs (to pull and pane workers, some waiting for the
// reply), broadcasts to a group and filtered polls, one every ActEvery.
// A primary's first actions are one of each, so even a short run has
// every kind; then they are drawn at random.
func (e *Engine) primaryLoop(ctx context.Context, p *Agent) {
	workers := append(append([]*Agent(nil), e.pull...), e.pane...)
	if len(workers) == 0 {
		return // nobody to brief
	}
	for n := 0; sleep(ctx, jitter(e.cfg.ActEvery)) == nil; n++ {
		x := rand.Float64()
		if n < len(firstActions) {
			x = firstActions[n]
		}
		switch {
		case x < 0.60:
			w := pick(workers)
			if n == 0 && len(e.pull) > 0 {
				w = pick(e.pull)
			} else if n == 1 && len(e.pane) > 0 {
				w = pick(e.pane)
			}
			kind := KindBrief
			if e.panes[w] != "" {
				kind = KindPaneBrief
			}
			r, _ := e.send(ctx, p, kind, []string{w.Addr()}, "bridge_send", "message", map[string]any{"target": w.Addr()})
			e.receive(ctx, p, r.Messages)
		case x < 0.70 && len(e.pull) > 0:
			w := pick(e.pull)
			args := map[string]any{"target": w.Addr(), "wait_s": 10}
			if e.cfg.NoWaits {
				delete(args, "wait_s")
			}
			r, _ := e.send(ctx, p, KindBrief, []string{w.Addr()}, "bridge_send", "message", args)
			e.receive(ctx, p, r.Messages)
		case x < 0.78:
			e.broadcast(ctx, p)
		default:
			w := pick(workers)
			// like a send, a poll under way when the traffic stops completes
			pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.RetryFor)
			start := time.Now()
			r, err := p.Call(pctx, "bridge_poll", map[string]any{"target": w.Addr(), "max": 20}, callTimeout)
			cancel()
			e.Ledger.Call(KindPoll, start, r, err)
			if err == nil {
				e.receive(ctx, p, r.Messages)
			}
		}
	}
}

// firstActions are a primary's first draws: a brief to a pull worker, one
// to a pane worker, a broadcast, a brief that waits, a filtered poll.
var firstActions = []float64{0, 0, 0.75, 0.65, 0.9}

func (e *Engine) broadcast(ctx context.Context, p *Agent) {
	var group string
	var members []*Agent
	if (rand.IntN(2) == 0 || len(e.pull) == 0) && len(e.pane) > 0 {
		group, members = e.groupPane, e.pane
	} else {
		group = pick(e.pull).Groups[0] // one team of pull workers
		for _, w := range e.pull {
			if w.Groups[0] == group {
				members = append(members, w)
			}
		}
	}
	to := make([]string, len(members))
	for i, m := range members {
		to[i] = m.Addr()
	}
	e.send(ctx, p, KindBroadcast, to, "bridge_broadcast", "message", map[string]any{"group": group})
}

// askTimeout (s) is long enough that an ask outlives a gateway restart
// and a broker outage: an accepted ask is owed to its target.
const askTimeout = 90

// askLoop: a pull worker asks a primary every AskEvery and waits for the
// answer (bridge_ask(turn_id) again while it is pending).
func (e *Engine) askLoop(ctx context.Context, w *Agent) {
	if len(e.primaries) == 0 {
		return // nobody to ask
	}
	for sleep(ctx, jitter(e.cfg.AskEvery)) == nil {
		p := pick(e.primaries)
		s := e.Ledger.Begin(KindAsk, w.Addr(), w.Host, []string{p.Addr()})
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.RetryFor)
		r, err := w.Call(bctx, "bridge_ask", map[string]any{"target": p.Addr(), "question": body(KindAsk, s.Tag, w.Addr()),
			"timeout_s": askTimeout, "request_id": s.Tag}, callTimeout)
		for tries := 0; err == nil && !r.IsError && r.Status == bridge.StatusPending && tries < 5; tries++ {
			r, err = w.Call(bctx, "bridge_ask", map[string]any{"turn_id": r.TurnID}, callTimeout)
		}
		cancel()
		e.Ledger.End(s, w.Host, r, err)
		if err == nil {
			e.receive(ctx, w, r.Messages)
		}
	}
}

// pollLoop drains a's inbox for as long as the engine runs.
func (e *Engine) pollLoop(ctx context.Context, a *Agent) {
	for ctx.Err() == nil {
		r, err := a.Call(ctx, "bridge_poll", map[string]any{"wait_s": 5, "max": 50}, callTimeout)
		if (err != nil && ctx.Err() == nil) || r.IsError {
			e.Ledger.ReceiveFailed(a.Addr(), r, err)
		}
		if err != nil || r.IsError {
			_ = sleep(ctx, 100*time.Millisecond)
			continue
		}
		e.receive(ctx, a, r.Messages)
	}
}

// carriesTag: the kinds whose bodies the driver wrote (receipts quote
// them, and must not count as deliveries).
var carriesTag = map[bridge.Kind]bool{bridge.KindSend: true, bridge.KindBroadcast: true, bridge.KindReply: true,
	bridge.KindAsk: true, bridge.KindMissedAsk: true, bridge.KindAnswer: true}

// receive accounts for the messages a got, and acts on them: a worker
// replies to a brief, a primary answers an ask.
func (e *Engine) receive(ctx context.Context, a *Agent, msgs []bridge.Message) {
	for _, m := range msgs {
		if !carriesTag[m.Kind] {
			e.Ledger.Receipt(m.Corr, string(m.Kind), m.Body)
			continue
		}
		e.Ledger.Delivered(TagOf(m.Body), a.Addr(), a.Host)
		switch {
		case m.Kind == bridge.KindSend && a.Role == "worker":
			e.reply(ctx, a, m.Body)
		case m.Kind == bridge.KindAsk && a.Role == "primary":
			go e.answer(ctx, a, m)
		}
	}
}

func (e *Engine) reply(ctx context.Context, w *Agent, brief string) {
	to := replyToOf(brief)
	if to == "" {
		return
	}
	e.send(ctx, w, KindReply, []string{to}, "bridge_send", "message", map[string]any{"target": to})
}

func (e *Engine) answer(ctx context.Context, p *Agent, ask bridge.Message) {
	to := replyToOf(ask.Body)
	if to == "" || ask.TurnID == "" {
		return
	}
	e.send(ctx, p, KindAnswer, []string{to}, "bridge_send", "message", map[string]any{"target": to, "turn_id": ask.TurnID})
}

// paneLoop watches what the agent in a's pane was prompted with: each
// brief typed there is a delivery, and the worker replies over its MCP
// session as an agent would.
func (e *Engine) paneLoop(ctx context.Context, a *Agent) {
	pane, seen := e.panes[a], 0
	for sleep(ctx, 50*time.Millisecond) == nil {
		got := e.cfg.Panes.Submitted(a.Host, pane)
		seen = min(seen, len(got)) // the list only grows; guard the slice anyway
		for _, prompt := range got[seen:] {
			tag := TagOf(prompt)
			if tag == "" {
				continue // a prompt the driver did not write (a nudge)
			}
			e.Ledger.Delivered(tag, a.Addr(), a.Host)
			if strings.Contains(prompt, "soak "+string(KindPaneBrief)+" ") {
				e.reply(ctx, a, prompt)
			}
		}
		seen = len(got)
	}
}

// MeasureRoster calls bridge_roster n times, one call at a time, from the
// agents in turn, and records each call's latency (KindRoster).
func (e *Engine) MeasureRoster(ctx context.Context, n int) {
	agents := e.all()
	for i := 0; i < n && len(agents) > 0 && ctx.Err() == nil; i++ {
		start := time.Now()
		r, err := agents[i%len(agents)].Call(ctx, "bridge_roster", map[string]any{}, callTimeout)
		if ctx.Err() != nil {
			return // interrupted: not the roster's failure
		}
		e.Ledger.Call(KindRoster, start, r, err)
	}
}
