package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
)

// Relay is `herdbridge mcp`: it registers over the gateway's admin socket
// and relays the agent's stdio to the MCP session the gateway runs there.
// When the gateway restarts it reconnects (same name, so the same entity
// and inbox), replays the client's initialize handshake, and re-issues the
// calls of bridge_send, bridge_broadcast and bridge_ask that were in
// flight: the relay gives each such call a request_id, so the re-issued
// call publishes nothing twice and the agent gets the real result. Other
// calls in flight are answered with an error saying to call them again.
// The agent's MCP server never has to be restarted by hand.
//
// The relay holds its name as one claimant (bridge.Claimant): req.Claim,
// or one drawn here (this pid, a random id), sent on every reconnect. When
// another claimant took the name over (or holds it after a gateway
// restart), the reconnect is refused and Relay returns that error.
func Relay(ctx context.Context, dir string, req Request, stdin io.Reader, stdout, log io.Writer) error {
	if log == nil {
		log = io.Discard
	}
	if req.Claim == nil {
		req.Claim = &bridge.Claimant{PID: os.Getpid(), ID: uuid.NewString()}
	}
	// the relay tells the gateway which results reached the client (and
	// which it held back because the client had cancelled the call): the
	// gateway acks what a call handed over on that word (relayack.go)
	req.ConfirmResults = true
	r := &relayer{dir: dir, req: req, out: stdout, pending: map[string][]byte{}, cancelled: map[string]bool{}, log: log}
	return r.run(ctx, stdin)
}

// StartError is Relay's error when its first connect fails (no gateway
// answers, or it refused the registration, e.g. a name held live): nothing
// was read from the client yet, so the caller can still answer it.
type StartError struct{ Err error }

func (e *StartError) Error() string { return e.Err.Error() }
func (e *StartError) Unwrap() error { return e.Err }

type relayer struct {
	dir string
	req Request
	log io.Writer

	outMu sync.Mutex
	out   io.Writer

	mu       sync.Mutex
	pending  map[string][]byte // client requests not yet answered by id: the line to re-issue, or nil
	initReq  []byte            // the client's initialize request, replayed on reconnect
	initNote []byte            // its notifications/initialized
	swallow  string            // id of a replayed initialize whose answer the client must not see
	// cancelled: pending calls the client cancelled (notifications/cancelled),
	// by canonical id: their results are not written to it, and not confirmed
	cancelled map[string]bool
}

type rpcProbe struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

func (r *relayer) writeOut(line []byte) error {
	r.outMu.Lock()
	defer r.outMu.Unlock()
	_, err := r.out.Write(append(line, '\n'))
	return err
}

// fromClient records what a client line means for a reconnect, and
// returns the line to send (with a request_id stamped on a retried call).
func (r *relayer) fromClient(line []byte) []byte {
	var p rpcProbe
	if json.Unmarshal(line, &p) != nil {
		return line
	}
	line, retry := stampRequestID(line)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case p.Method == "initialize":
		r.initReq = append([]byte(nil), line...)
	case p.Method == "notifications/initialized":
		r.initNote = append([]byte(nil), line...)
	case p.Method == "notifications/cancelled":
		r.noteCancel(line)
	}
	if p.Method != "" && len(p.ID) > 0 {
		r.pending[string(p.ID)] = nil
		if retry {
			r.pending[string(p.ID)] = line
		}
	}
	return line
}

// fromGateway reports whether a gateway line goes on to the client, and
// for the result of a client's call, its id: the gateway is told whether
// the client got it (confirm).
func (r *relayer) fromGateway(line []byte) (forward bool, result json.RawMessage) {
	var p rpcProbe
	if json.Unmarshal(line, &p) != nil || p.Method != "" || len(p.ID) == 0 {
		return true, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if string(p.ID) == r.swallow {
		r.swallow = ""
		return false, nil
	}
	delete(r.pending, string(p.ID))
	if id := canonicalRPCID(p.ID); r.cancelled[id] {
		// the client gave up on this call and ignores its result: not
		// written, so what it handed over goes back to held
		delete(r.cancelled, id)
		return false, p.ID
	}
	return true, p.ID
}

// failPending answers the calls in flight when the gateway went away:
// all of them, or (retriable false) those that are not re-issued.
func (r *relayer) failPending(retriable bool) {
	r.mu.Lock()
	var ids []string
	for id, line := range r.pending {
		if line == nil || retriable {
			ids = append(ids, id)
			delete(r.pending, id)
		}
	}
	r.mu.Unlock()
	for _, id := range ids {
		msg, _ := json.Marshal(map[string]any{
			"jsonrpc": "2.0", "id": json.RawMessage(id),
			"error": map[string]any{"code": -32000, "message": "herdbridge: the gateway restarted while this call was open; call it again"},
		})
		_ = r.writeOut(msg)
	}
}

func (r *relayer) run(ctx context.Context, stdin io.Reader) error {
	c, br, _, err := Dial(r.dir, r.req)
	if err != nil {
		return &StartError{Err: err} // first connect: fail fast with the clear error
	}
	r.req.Takeover = false // taken once: a reconnect must not take it back from a later taker
	lines := make(chan []byte, 64)
	stdinDone := make(chan struct{})
	go func() {
		defer close(stdinDone)
		sc := bufio.NewScanner(stdin)
		sc.Buffer(make([]byte, 64<<10), maxRelayLine)
		for sc.Scan() {
			line := append([]byte(nil), sc.Bytes()...)
			select {
			case lines <- line:
			case <-ctx.Done():
				return
			}
		}
	}()
	for reconnects := 0; ; reconnects++ {
		gone := make(chan struct{})
		go func(br *bufio.Reader, c net.Conn) {
			defer close(gone)
			sc := bufio.NewScanner(br)
			sc.Buffer(make([]byte, 64<<10), maxRelayLine)
			for sc.Scan() {
				line := sc.Bytes()
				forward, result := r.fromGateway(line)
				written := forward && r.writeOut(line) == nil
				if result != nil {
					confirm(c, result, written)
				}
				if forward && !written {
					return
				}
			}
		}(br, c)
		if reconnects > 0 {
			r.forgetCancels()
			r.replayInit(c)
			r.reissue(c)
		}
		stop := r.pump(ctx, c, lines, stdinDone, gone)
		c.Close()
		<-gone
		if stop {
			return nil
		}
		r.failPending(false)
		fmt.Fprintf(r.log, "herdbridge mcp: gateway connection lost; reconnecting\n")
		if c, br, err = r.reconnect(ctx, stdinDone); err != nil || c == nil {
			r.failPending(true)
			return err
		}
		fmt.Fprintf(r.log, "herdbridge mcp: reconnected to the gateway\n")
	}
}

const maxRelayLine = 4 << 20

// pump forwards client lines until the client is done (true) or the
// gateway connection is gone (false).
func (r *relayer) pump(ctx context.Context, c net.Conn, lines <-chan []byte, stdinDone, gone <-chan struct{}) bool {
	for {
		select {
		case line := <-lines:
			line = r.fromClient(line)
			if _, err := c.Write(append(line, '\n')); err != nil {
				return false
			}
		case <-stdinDone:
			// drain what was read before EOF, then stop
			for {
				select {
				case line := <-lines:
					line = r.fromClient(line)
					_, _ = c.Write(append(line, '\n'))
				default:
					return true
				}
			}
		case <-gone:
			return false
		case <-ctx.Done():
			return true
		}
	}
}

func (r *relayer) reconnect(ctx context.Context, stdinDone <-chan struct{}) (net.Conn, *bufio.Reader, error) {
	backoff := 100 * time.Millisecond
	deadline := time.Now().Add(5 * time.Minute)
	for {
		c, br, rep, err := Dial(r.dir, r.req)
		if err == nil {
			return c, br, nil
		}
		if rep.Code == CodeNameHeld {
			return nil, nil, fmt.Errorf("lost the name %q: %w", r.req.Name, err)
		}
		if time.Now().After(deadline) {
			return nil, nil, fmt.Errorf("gateway gone for 5 minutes: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-stdinDone:
			return nil, nil, nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// reissue sends again the calls cut by the gateway restart, each with the
// request_id it carried: what went out before is not sent twice.
func (r *relayer) reissue(c net.Conn) {
	r.mu.Lock()
	var lines [][]byte
	for _, line := range r.pending {
		if line != nil {
			lines = append(lines, line)
		}
	}
	r.mu.Unlock()
	for _, line := range lines {
		if _, err := c.Write(append(line, '\n')); err != nil {
			return // gone again: the next reconnect re-issues them
		}
	}
}

// replayInit repeats the client's handshake on a new session; the answer to
// the replayed initialize is swallowed.
func (r *relayer) replayInit(c net.Conn) {
	r.mu.Lock()
	initReq, initNote := r.initReq, r.initNote
	r.mu.Unlock()
	if initReq == nil {
		return
	}
	var m map[string]any
	if json.Unmarshal(initReq, &m) != nil {
		return
	}
	id := fmt.Sprintf("herdbridge-reinit-%d", time.Now().UnixNano())
	m["id"] = id
	raw, _ := json.Marshal(m)
	idRaw, _ := json.Marshal(id)
	r.mu.Lock()
	r.swallow = string(idRaw)
	r.mu.Unlock()
	_, _ = c.Write(append(raw, '\n'))
	if initNote != nil {
		_, _ = c.Write(append(initNote, '\n'))
	}
}
