package herdr

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Event is one pushed line of an events.subscribe stream.
type Event struct {
	Name        string // wire name: pane_closed (topology) or pane.agent_status_changed (pane-scoped)
	PaneID      string
	AgentStatus string
	Pane        *PaneInfo // pane_created / pane_updated
	Raw         json.RawMessage
}

// Subscription is a live events.subscribe stream. Events arrive on C until
// the context ends or the stream breaks; then C is closed and Err says why.
// A new subscription first replays herdr's ring of recent topology events
// (up to 512): the consumer must reconcile them against a snapshot taken
// after the subscription started (see Watcher).
type Subscription struct {
	C    <-chan Event
	err  error
	done chan struct{}
}

// Err is why the stream ended (nil while it runs or after ctx ended it).
func (s *Subscription) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// decodeEvent parses one untrusted event line.
func decodeEvent(line []byte) (Event, error) {
	var raw struct {
		Event string          `json:"event"`
		Data  json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(line, &raw); err != nil {
		return Event{}, &ProtocolError{Method: "events.subscribe", Msg: "event is not JSON", Err: err}
	}
	if raw.Event == "" {
		return Event{}, &ProtocolError{Method: "events.subscribe", Msg: "event line without an event name"}
	}
	ev := Event{Name: raw.Event, Raw: raw.Data}
	var data struct {
		PaneID      string    `json:"pane_id"`
		AgentStatus string    `json:"agent_status"`
		Pane        *PaneInfo `json:"pane"`
	}
	if len(raw.Data) > 0 {
		if err := json.Unmarshal(raw.Data, &data); err != nil {
			return Event{}, &ProtocolError{Method: "events.subscribe", Msg: "event data does not decode", Err: err}
		}
	}
	ev.PaneID, ev.AgentStatus, ev.Pane = data.PaneID, data.AgentStatus, data.Pane
	if ev.PaneID == "" && data.Pane != nil {
		ev.PaneID = data.Pane.PaneID
	}
	return ev, nil
}

// Subscribe opens events.subscribe with subs (each {"type": "...", ...}).
func (c *Client) Subscribe(ctx context.Context, subs []map[string]any) (*Subscription, error) {
	id := "hb-sub-" + strconv.FormatUint(c.seq.Add(1), 10)
	line, err := json.Marshal(request{ID: id, Method: "events.subscribe", Params: map[string]any{"subscriptions": subs}})
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	conn, err := c.dial(dctx)
	cancel()
	if err != nil {
		return nil, err
	}
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write(append(line, '\n')); err != nil {
		conn.Close()
		return nil, fmt.Errorf("herdr: events.subscribe: %w", err)
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	ack, err := readLine(br)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("herdr: events.subscribe: %w", err)
	}
	if _, err := decodeReply(ack, "events.subscribe", id, "subscription_started"); err != nil {
		conn.Close()
		return nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	ch := make(chan Event, 256)
	s := &Subscription{C: ch, done: make(chan struct{})}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	go func() {
		defer close(ch) // after done: whoever sees C closed can read Err at once
		defer close(s.done)
		defer stop()
		defer conn.Close()
		for {
			l, err := readLine(br)
			if err != nil {
				if ctx.Err() == nil {
					s.err = fmt.Errorf("herdr: event stream ended: %w", err)
				}
				return
			}
			ev, err := decodeEvent(l)
			if err != nil { // one bad line does not end the stream
				if c.Logger != nil {
					c.Logger.Warn("herdr sent an event line that does not parse; skipped", "method", "events.subscribe", "bytes", len(l), "err", err)
				}
				continue
			}
			select {
			case ch <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return s, nil
}
