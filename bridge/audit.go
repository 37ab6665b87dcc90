package bridge

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// AuditRecord is one line of the audit log: metadata only, never a body.
type AuditRecord struct {
	At      time.Time `json:"at"`
	Dir     string    `json:"dir"` // out: published by this gateway; in: arrived at it
	Kind    Kind      `json:"kind,omitempty"`
	MsgID   string    `json:"msgId,omitempty"`
	TraceID string    `json:"traceId,omitempty"`
	From    string    `json:"from,omitempty"`
	To      string    `json:"to,omitempty"`
	Host    string    `json:"host,omitempty"`
	Key     string    `json:"key,omitempty"`
	Verdict string    `json:"verdict"` // published | publish failed: … | accepted | refused: <reason>
}

// AuditLog appends AuditRecords as JSON lines to a file opened O_APPEND
// (0600). Writes are buffered and flushed every FlushEvery and on Close, so
// a crash loses at most that much of the log — never a message.
type AuditLog struct {
	mu   sync.Mutex
	f    *os.File
	w    *bufio.Writer
	err  error
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// AuditFlushEvery is how often buffered audit lines reach the file.
const AuditFlushEvery = 100 * time.Millisecond

// OpenAuditLog opens (creates) the append-only audit log at path.
func OpenAuditLog(path string) (*AuditLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	a := &AuditLog{f: f, w: bufio.NewWriterSize(f, 64<<10), stop: make(chan struct{}), done: make(chan struct{})}
	go a.flusher()
	return a, nil
}

func (a *AuditLog) flusher() {
	defer close(a.done)
	t := time.NewTicker(AuditFlushEvery)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-t.C:
			a.mu.Lock()
			if a.w.Buffered() > 0 {
				a.setErr(a.w.Flush())
			}
			a.mu.Unlock()
		}
	}
}

func (a *AuditLog) setErr(err error) {
	if err != nil && a.err == nil {
		a.err = err
	}
}

// Write appends r. The first write error is kept (Err) and reported once.
func (a *AuditLog) Write(r AuditRecord) {
	b, err := json.Marshal(r)
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.setErr(err)
		return
	}
	_, err = a.w.Write(append(b, '\n'))
	a.setErr(err)
}

// Err is the first error the log met, if any.
func (a *AuditLog) Err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// Close flushes and closes the file. Idempotent.
func (a *AuditLog) Close() error {
	a.once.Do(func() {
		close(a.stop)
		<-a.done
		a.mu.Lock()
		defer a.mu.Unlock()
		a.setErr(a.w.Flush())
		a.setErr(a.f.Close())
	})
	return a.Err()
}

// audit writes r to the configured audit log, if any.
func (c *Core) audit(r AuditRecord) {
	if c.cfg.Audit == nil {
		return
	}
	if r.At.IsZero() {
		r.At = c.cfg.Now()
	}
	c.cfg.Audit.Write(r)
}

// auditEnv records env's metadata with verdict.
func (c *Core) auditEnv(dir string, env *Envelope, key, verdict string) {
	if c.cfg.Audit == nil {
		return
	}
	c.audit(AuditRecord{Dir: dir, Kind: env.Kind, MsgID: env.MsgID, TraceID: env.TraceID, From: env.From, To: env.To, Host: env.Host, Key: key, Verdict: verdict})
}
