package bridge

import (
	"fmt"
	"unicode/utf8"
)

// The result byte budget. A tool result that carries message bodies
// (bridge_poll drained or peeked, the inbox resource, bridge_history)
// carries at most Config.ResultMaxBytes of them, counted as their JSON
// encoding (jsonCost): what the result costs in memory and on the wire
// grows with the bodies it carries, each copy of them (the text content,
// structuredContent, the encoded response) about that size. The rest stays
// held (or, for history, older entries are left for a later call), and the
// result says how many and how to get them. A message bigger than the whole
// budget is still delivered: alone, as the first of its result.
//
// 2 MiB: what a reader costs in memory while its result is built and
// written is about ten times its bodies (decoded from the store, the text,
// mcp-go's encoding of structuredContent and of the whole response, each
// growing by doubling), and eight readers that stall plus one draining
// must keep the gateway under 256 MiB (BenchmarkGatewayRSSBigDrain: 409
// MiB at 4 MiB). It still carries two of the largest body the wire
// carries (MaxBodyBytes), eight of the largest a tool accepts (256 KiB),
// and a drain of ordinary messages (500 of 4 KiB) whole; and it is more
// text than a model reads in one go.
const DefaultResultMaxBytes = 2 << 20

// jsonCost is how many bytes body takes inside a JSON string as
// encoding/json writes it (mcp-go encodes results with it): escaped quotes,
// backslashes and control characters, HTML-escaped <, > and &, U+2028 and
// U+2029, and U+FFFD for an invalid byte (a valid U+FFFD is counted as
// one too: an upper bound). A body of 256 KiB of '<' costs 1.5 MiB, and
// the budget counts it so.
func jsonCost(body []byte) int {
	n := 0
	for i := 0; i < len(body); {
		r, size := utf8.DecodeRune(body[i:]) // not range string(body): that copies the body
		n += runeCost(r)
		i += size
	}
	return n
}

// jsonCostString is jsonCost of a string.
func jsonCostString(body string) int {
	n := 0
	for _, r := range body {
		n += runeCost(r)
	}
	return n
}

func runeCost(r rune) int {
	switch {
	case r == '"' || r == '\\' || r == '\b' || r == '\f' || r == '\n' || r == '\r' || r == '\t':
		return 2
	case r < 0x20 || r == '<' || r == '>' || r == '&' || r == '\u2028' || r == '\u2029' || r == utf8.RuneError:
		return len(`\u003c`)
	case r < utf8.RuneSelf:
		return 1
	}
	return utf8.RuneLen(r)
}

// budget is what a result may still carry, in jsonCost bytes.
type budget struct {
	left  int
	taken int // messages counted against it
}

func (c *Core) newBudget() *budget { return &budget{left: c.cfg.ResultMaxBytes} }

// fits reports whether a message costing cost fits, and counts it if so:
// the first always fits, the others while the budget lasts.
func (b *budget) fits(cost int) bool {
	if b.taken > 0 && cost > b.left {
		return false
	}
	b.left -= cost
	b.taken++
	return true
}

// moreNext is the next step of a result that left more messages
// (matching its filter) held than it carries.
func (c *Core) moreNext(more int, target string) string {
	call := "bridge_poll"
	if target != "" {
		call = fmt.Sprintf("bridge_poll(target=%q)", target)
	}
	return fmt.Sprintf("%d more message(s) held for you did not fit in this result (at most max messages and %d bytes of bodies per result): call %s again for them",
		more, c.cfg.ResultMaxBytes, call)
}

// dropBodies lets go of the bodies of claimed messages the store keeps,
// once their result holds them: the result is the one copy in memory,
// however long its reader takes. A message only in memory (its transport
// still has it, nothing written) keeps its body: it is still to be written
// if the result is not delivered. What the handover reads after the write
// (kind, ids, times) stays; bodies reads a body again if it is needed.
func (c *Core) dropBodies(st *entState, hms []*heldMsg) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, hm := range hms {
		if hm.seq != 0 && hm.env != nil && hm.env.Body != nil {
			head := *hm.env
			head.Body = nil
			hm.env = &head
		}
	}
}

// resultCost is what hms take of a result's budget.
func resultCost(hms []*heldMsg) int {
	n := 0
	for _, hm := range hms {
		n += int(hm.cost)
	}
	return n
}
