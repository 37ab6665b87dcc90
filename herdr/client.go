package herdr

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// MaxRequestBytes is herdr's limit on one request line.
const MaxRequestBytes = 1 << 20

// maxReplyBytes bounds one reply line we accept (reads of 1000 lines and
// session snapshots are large; anything past this is not herdr).
const maxReplyBytes = 32 << 20

// Client talks to one herdr server over its local socket API. The zero
// value is ready to use: it finds the socket the way herdr's CLI does.
// Every call opens its own connection (herdr serves one request per
// connection) and has a deadline: the context's, else Timeout.
type Client struct {
	// Path is the API socket; "" resolves it with SocketPath.
	Path string
	// Dial opens a connection (tests, or a tunnelled socket); nil dials unix.
	Dial func(ctx context.Context, path string) (net.Conn, error)
	// Timeout bounds a call whose context has no deadline (default 5s).
	Timeout time.Duration
	// Logger is told about lines herdr sent that do not parse (nil: discard).
	Logger *slog.Logger

	seq   atomic.Uint64
	mu    sync.Mutex
	proto int // cached ping protocol, 0 until known
}

// SocketPath resolves herdr's API socket as its CLI does:
// $HERDR_SOCKET_PATH, then $HERDR_SESSION's socket, then the default
// session's under $XDG_CONFIG_HOME/herdr (else ~/.config/herdr).
func SocketPath() (string, error) {
	if p := os.Getenv("HERDR_SOCKET_PATH"); p != "" {
		return p, nil
	}
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("herdr: no $HERDR_SOCKET_PATH, $XDG_CONFIG_HOME or home directory to find the socket in")
		}
		dir = filepath.Join(home, ".config")
	}
	dir = filepath.Join(dir, "herdr")
	if s := os.Getenv("HERDR_SESSION"); s != "" && s != "default" {
		if !validSession(s) {
			return "", fmt.Errorf("herdr: $HERDR_SESSION %q is not a valid session name", s)
		}
		return filepath.Join(dir, "sessions", s, "herdr.sock"), nil
	}
	return filepath.Join(dir, "herdr.sock"), nil
}

func validSession(s string) bool {
	if len(s) == 0 || len(s) > 64 || s == "." || s == ".." {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

func (c *Client) path() (string, error) {
	if c.Path != "" {
		return c.Path, nil
	}
	return SocketPath()
}

func (c *Client) dial(ctx context.Context) (net.Conn, error) {
	path, err := c.path()
	if err != nil {
		return nil, err
	}
	var conn net.Conn
	if c.Dial != nil {
		conn, err = c.Dial(ctx, path)
	} else {
		var d net.Dialer
		conn, err = d.DialContext(ctx, "unix", path)
	}
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, &NotRunningError{Path: path, Err: err}
		}
		return nil, fmt.Errorf("herdr: connect %s: %w", path, err)
	}
	return conn, nil
}

type request struct {
	ID     string `json:"id"`
	Method string `json:"method"`
	Params any    `json:"params"`
}

// reply is one line from herdr: a result or an error, never both.
type reply struct {
	ID     *string         `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// decodeReply parses one untrusted reply line for method, expecting id and,
// on success, a result whose type is one of want (any when empty).
func decodeReply(line []byte, method, id string, want ...string) (json.RawMessage, error) {
	var r reply
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if err := dec.Decode(&r); err != nil {
		return nil, &ProtocolError{Method: method, Msg: "reply is not JSON", Err: err}
	}
	if r.ID == nil {
		return nil, &ProtocolError{Method: method, Msg: "reply has no id"}
	}
	if r.Error != nil {
		if *r.ID != id && *r.ID != "" {
			return nil, &ProtocolError{Method: method, Msg: fmt.Sprintf("reply id %q does not match request %q", *r.ID, id)}
		}
		if r.Error.Code == "" {
			return nil, &ProtocolError{Method: method, Msg: "error reply without a code"}
		}
		return nil, &Error{Method: method, Code: r.Error.Code, Message: r.Error.Message}
	}
	if *r.ID != id {
		return nil, &ProtocolError{Method: method, Msg: fmt.Sprintf("reply id %q does not match request %q", *r.ID, id)}
	}
	if len(r.Result) == 0 || string(r.Result) == "null" {
		return nil, &ProtocolError{Method: method, Msg: "reply has neither result nor error"}
	}
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(r.Result, &head); err != nil || head.Type == "" {
		return nil, &ProtocolError{Method: method, Msg: "result has no type", Err: err}
	}
	if len(want) > 0 {
		ok := false
		for _, w := range want {
			ok = ok || head.Type == w
		}
		if !ok {
			return nil, &ProtocolError{Method: method, Msg: fmt.Sprintf("result type %q, want %v", head.Type, want)}
		}
	}
	return r.Result, nil
}

// Call sends one request and decodes the result into out (nil: ignore). want
// lists acceptable result types. The connection is closed when the call
// returns; cancelling ctx closes it early, which also aborts a wait on the
// server.
func (c *Client) Call(ctx context.Context, method string, params, out any, want ...string) error {
	if params == nil {
		params = struct{}{}
	}
	id := "hb-" + strconv.FormatUint(c.seq.Add(1), 10)
	line, err := json.Marshal(request{ID: id, Method: method, Params: params})
	if err != nil {
		return fmt.Errorf("herdr: encode %s: %w", method, err)
	}
	if len(line)+1 > MaxRequestBytes {
		return fmt.Errorf("herdr: %s request is %d bytes, over herdr's %d-byte limit", method, len(line)+1, MaxRequestBytes)
	}
	if _, ok := ctx.Deadline(); !ok {
		t := c.Timeout
		if t <= 0 {
			t = 5 * time.Second
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	conn, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	dl, _ := ctx.Deadline()
	_ = conn.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	// One write, no half-close, nothing after it: herdr treats EOF or any
	// extra byte during a wait as the client going away.
	if _, err := conn.Write(append(line, '\n')); err != nil {
		return c.ioErr(ctx, method, err)
	}
	raw, err := readLine(bufio.NewReaderSize(conn, 64<<10))
	if err != nil {
		return c.ioErr(ctx, method, err)
	}
	res, err := decodeReply(raw, method, id, want...)
	if err != nil {
		return err
	}
	if out != nil {
		if err := json.Unmarshal(res, out); err != nil {
			return &ProtocolError{Method: method, Msg: "result does not decode", Err: err}
		}
	}
	return nil
}

func (c *Client) ioErr(ctx context.Context, method string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("herdr: %s: %w", method, ctx.Err())
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// The connection's deadline is the context's, and it can fire a
		// moment before the context's own timer does.
		return fmt.Errorf("herdr: %s: %w", method, context.DeadlineExceeded)
	}
	return fmt.Errorf("herdr: %s: %w", method, err)
}

// readLine reads one newline-terminated line of up to maxReplyBytes.
func readLine(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > maxReplyBytes {
			return nil, fmt.Errorf("reply line over %d bytes", maxReplyBytes)
		}
		if err == nil {
			return buf[:len(buf)-1], nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if len(buf) > 0 && errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("connection closed mid-reply")
			}
			return nil, err
		}
	}
}

// Protocol is the server's protocol number, from one ping (cached).
func (c *Client) Protocol(ctx context.Context) (int, error) {
	c.mu.Lock()
	p := c.proto
	c.mu.Unlock()
	if p > 0 {
		return p, nil
	}
	pong, err := c.Ping(ctx)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	c.proto = pong.Protocol
	c.mu.Unlock()
	return pong.Protocol, nil
}

// HasAgentPrompt reports whether the server has agent.prompt and agent.wait
// (protocol 17 and later); older servers need pane.send_input and polling.
func (c *Client) HasAgentPrompt(ctx context.Context) (bool, error) {
	p, err := c.Protocol(ctx)
	return p >= 17, err
}
