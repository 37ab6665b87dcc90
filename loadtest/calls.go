package loadtest

import (
	"fmt"
	"time"
)

// plainCalls are the calls of one kind that carry no message (filtered
// polls, roster reads): nothing is owed, only latency and errors count.
type plainCalls struct {
	took   []time.Duration
	errors int
}

// Call records a plain call of kind that started at start (err: it never
// returned a result; r.IsError: a tool error).
func (l *Ledger) Call(kind Kind, start time.Time, r Result, err error) {
	took := time.Since(start)
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.plain[kind]
	if c == nil {
		c = &plainCalls{}
		l.plain[kind] = c
	}
	c.took = append(c.took, took)
	if err != nil || r.IsError {
		c.errors++
		why := r.Text
		if err != nil {
			why = err.Error()
		}
		l.callErrs = appendMax(l.callErrs, fmt.Sprintf("%s at %s: %s", kind, start.Format("15:04:05.000"), clip(why, 160)))
	}
}

// ReceiveFailed records that a receiving loop's poll of addr failed.
func (l *Ledger) ReceiveFailed(addr string, r Result, err error) {
	why := r.Text
	if err != nil {
		why = err.Error()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.receiveFailed++
	l.callErrs = appendMax(l.callErrs, fmt.Sprintf("receiving poll of %s at %s: %s", addr, time.Now().Format("15:04:05.000"), clip(why, 160)))
}

// plainFigures is kind's plain calls as KindFigures: calls, those that
// failed (NotAccepted "error"), and the call latencies.
func (l *Ledger) plainFigures(kind Kind) KindFigures {
	f := KindFigures{Kind: kind, NotAccepted: map[string]int{}, Statuses: map[string]int{}}
	c := l.plain[kind]
	if c == nil {
		return f
	}
	f.Sent, f.Accepted = len(c.took), len(c.took)-c.errors
	if c.errors > 0 {
		f.NotAccepted["error"] = c.errors
		f.Statuses["error"] = c.errors
	}
	if f.Accepted > 0 {
		f.Statuses["ok"] = f.Accepted
	}
	f.CallP50ms, f.CallP90ms, f.CallP99ms = percentiles(c.took)
	return f
}

// Progress is how many calls were made so far and how many failed (a
// tool error, a refusal, a failed receiving poll); for a progress line.
func (l *Ledger) Progress() (calls, failed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.sends {
		if !s.done {
			continue
		}
		calls++
		if !accepted[s.Kind][s.Status] {
			failed++
		}
	}
	for _, c := range l.plain {
		calls += len(c.took)
		failed += c.errors
	}
	return calls, failed + l.receiveFailed
}
