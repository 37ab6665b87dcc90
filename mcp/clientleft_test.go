package mcp

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// TestResultAfterClientLeftIsReturned is the HTTP half of the row
// "a cancelled poll" (TestSigstopUnderLoad found it): the gateway stalled
// (SIGSTOP) after a call had handed messages over and before it wrote the
// result; meanwhile the client gave up — over streamable HTTP that is
// closing the request's connection — and sent its next request on a new
// one. On waking, the result goes into a socket the client has closed (the
// write succeeds), and then the next request is read: before, that acked
// the messages, which nobody had read. Now nothing is written to a client
// that closed the connection before the first byte of its result: the
// messages go back to held unflagged (the client cannot have seen them).
func TestResultAfterClientLeftIsReturned(t *testing.T) {
	var acked, returned, seen atomic.Int32
	clientGone := make(chan struct{})
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		id := requestID(raw)
		if id == "1" {
			bridge.HandoverOf(r.Context()).OnSettle(func() { acked.Add(1) }, func(s bool) {
				returned.Add(1)
				if s {
					seen.Add(1)
				}
			})
			<-clientGone // the stall: the client gives up meanwhile
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{}}`, id)
	})
	srv := httptest.NewUnstartedServer((&Server{}).streamableHandover(next, 5*time.Second))
	srv.Config.ConnContext = ConnContext
	srv.Start()
	defer srv.Close()

	first, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	post(t, first, 1)
	time.Sleep(100 * time.Millisecond) // the call is running
	first.Close()                      // the client's timeout
	close(clientGone)
	time.Sleep(100 * time.Millisecond) // the result is written into the closed socket
	second, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	post(t, second, 2)
	if _, err := http.ReadResponse(bufio.NewReader(second), nil); err != nil {
		t.Fatal(err)
	}
	if acked.Load() != 0 || returned.Load() != 1 || seen.Load() != 0 {
		t.Fatalf("a result due after its client had closed the connection: acked %d, returned %d (flagged %d); want returned once, unflagged",
			acked.Load(), returned.Load(), seen.Load())
	}
}

// post writes a JSON-RPC call with id on c as a streamable-HTTP client does.
func post(t *testing.T, c net.Conn, id int) {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"bridge_poll"}}`, id)
	req := fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	if _, err := io.Copy(c, strings.NewReader(req)); err != nil {
		t.Fatal(err)
	}
}
