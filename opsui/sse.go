package opsui

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The live feed as Server-Sent Events, at /ui/api/events. Each hop is an
// "hop" event whose id is "<boot>-<seq>", so a browser that reconnects to
// the same gateway run (Last-Event-ID) gets what it missed that is still
// in the ring, and one that reconnects after a restart gets the new run's
// backlog and sees a new boot in the "hello" event. A reader too slow for
// the ring gets a "dropped" event saying how many it missed; a write that
// cannot go out within streamWriteWait (a stalled browser, a full TCP
// window) ends the stream, so a stalled tab holds one goroutine and a
// cursor, never a growing buffer.

const (
	backlog         = 200              // items a new stream starts with
	batch           = 64               // items written per wake-up before checking again
	keepAlive       = 15 * time.Second // a comment line, so proxies and the browser know it is alive
	streamWriteWait = 10 * time.Second
	retryMs         = 2000 // the browser's reconnect delay
)

// hello is the first event of a stream.
type hello struct {
	Host string `json:"host"`
	Boot string `json:"boot"`
	Last uint64 `json:"last"` // the newest seq when the stream began
}

// dropped says how many hops a stream missed.
type dropped struct {
	Missed uint64 `json:"missed"`
}

func (h *handler) events(w http.ResponseWriter, r *http.Request) {
	if !h.needOperator(w, r) {
		return
	}
	if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r) {
		writeJSON(w, http.StatusForbidden, apiError{Error: "forbidden_origin", Message: "Origin " + o + " is not this page's: the feed is served to the operator page only"})
		return
	}
	sub, err := h.cfg.Feed.Subscribe()
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, apiError{Error: "too_many_streams", Message: err.Error()})
		return
	}
	defer h.cfg.Feed.Unsubscribe(sub)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return // a HEAD gets the headers, not a stream nobody reads
	}
	s := &stream{h: h, w: w, rc: http.NewResponseController(w), r: r, sub: sub}
	// the server sets no write deadline of its own (no WriteTimeout), so
	// one of ours would outlive the stream on a kept-alive connection
	defer func() { _ = s.rc.SetWriteDeadline(time.Time{}) }()
	if err := s.run(); err != nil && !errors.Is(err, errStreamDone) {
		h.cfg.Log.Debug("operator feed stream ended", "err", err)
	}
}

// sameOrigin: o is the origin the request was made to, as a browser
// serializes it (scheme://host[:port], nothing more).
func sameOrigin(o string, r *http.Request) bool {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return r.Host != "" && strings.EqualFold(o, scheme+"://"+r.Host)
}

var errStreamDone = errors.New("stream done")

type stream struct {
	h      *handler
	w      http.ResponseWriter
	rc     *http.ResponseController
	r      *http.Request
	sub    *Sub
	cursor uint64
}

func (s *stream) run() error {
	feed := s.h.cfg.Feed
	last := feed.Last()
	s.cursor = s.resume(last)
	if err := s.send(fmt.Sprintf("retry: %d\n", retryMs) + event("hello", "", hello{Host: s.h.cfg.Host, Boot: s.h.cfg.Boot, Last: last})); err != nil {
		return err
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		if err := s.drain(); err != nil {
			return err
		}
		select {
		case <-s.sub.Wake():
		case <-tick.C:
			if !s.h.cfg.Operator(s.r) { // the session ended while the page was open
				_ = s.send(event("logout", "", apiError{Error: "operator_login_needed", Message: "the operator session ended: run `herdbridge ui`"}))
				return errStreamDone
			}
			if err := s.send(": keep-alive\n\n"); err != nil {
				return err
			}
		case <-s.r.Context().Done():
			return errStreamDone
		case <-s.h.stop:
			return errStreamDone
		}
	}
}

// resume is the cursor a stream starts after: the Last-Event-ID of a
// browser reconnecting to this run, else the backlog.
func (s *stream) resume(last uint64) uint64 {
	if n, ok := parseEventID(s.r.Header.Get("Last-Event-ID"), s.h.cfg.Boot); ok && n <= last {
		return n
	}
	if last > backlog {
		return last - backlog
	}
	return 0
}

// parseEventID reads a Last-Event-ID, "<boot>-<seq>": the seq, and
// whether the id is one of this gateway run's (the browser sends back
// whatever it was given, or anything a script sets).
func parseEventID(id, boot string) (uint64, bool) {
	i := strings.LastIndexByte(id, '-')
	if i <= 0 || id[:i] != boot {
		return 0, false
	}
	n, err := strconv.ParseUint(id[i+1:], 10, 64)
	if err != nil || strconv.FormatUint(n, 10) != id[i+1:] {
		return 0, false
	}
	return n, true
}

// drain writes every item past the cursor, a batch at a time.
func (s *stream) drain() error {
	for {
		items, missed := s.h.cfg.Feed.Since(s.cursor, batch)
		if len(items) == 0 {
			return nil
		}
		var b strings.Builder
		if missed > 0 {
			b.WriteString(event("dropped", "", dropped{Missed: missed}))
		}
		for i := range items {
			s.h.name(&items[i])
			b.WriteString(event("hop", fmt.Sprintf("%s-%d", s.h.cfg.Boot, items[i].Seq), items[i]))
		}
		if err := s.send(b.String()); err != nil {
			return err
		}
		s.cursor = items[len(items)-1].Seq
	}
}

// send writes and flushes text within streamWriteWait.
func (s *stream) send(text string) error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(streamWriteWait))
	if _, err := s.w.Write([]byte(text)); err != nil {
		return err
	}
	return s.rc.Flush()
}

// event is one SSE event (data is JSON: one line, no newline in it).
func event(name, id string, data any) string {
	raw, _ := json.Marshal(data)
	var b strings.Builder
	if id != "" {
		b.WriteString("id: " + id + "\n")
	}
	b.WriteString("event: " + name + "\ndata: ")
	b.Write(raw)
	b.WriteString("\n\n")
	return b.String()
}
