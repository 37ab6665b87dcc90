package mcp

import (
	"strconv"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/herdbridge/herdbridge/bridge"
)

// What the model sees is designed: Claude Code and Codex show the model only
// JSON.stringify(structuredContent), Gemini CLI and pi only the text. So
// every result — a tool error too — carries in structuredContent what to
// call next (next) and, when something went wrong, why (reason), and the
// text says the same in the same words (summaryAt writes both lines).

// StatusError is the status of a tool error's structuredContent: the call
// was refused or could not run; reason says why, next what to do.
const StatusError = "error"

// waitArg is a wait as a next step names it ("wait_s=45").
func waitArg(d time.Duration) string {
	return "wait_s=" + strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}

// pollFor is the bridge_poll call that waits as long as this caller may
// for what target sends next.
func pollFor(target string, wait time.Duration) string {
	if target == "" {
		return "bridge_poll(" + waitArg(wait) + ")"
	}
	return "bridge_poll(target=" + target + ", " + waitArg(wait) + ")"
}

// fillNext gives res a next step when the core left none: what a model
// should call after this tool's result with this status. wait is the
// longest this caller may wait (its client's ceiling or --max-wait).
func fillNext(tool string, res *bridge.Result, wait time.Duration) {
	if res.Next != "" {
		return
	}
	if n, ok := toolNext(tool, res, wait); ok {
		res.Next = n
		return
	}
	res.Next = statusNext(res, wait)
}

// toolNext is the next step where it depends on the tool, not only on the
// status.
func toolNext(tool string, res *bridge.Result, wait time.Duration) (string, bool) {
	t := res.Target
	switch tool {
	case "bridge_spawn":
		if res.Status == bridge.StatusConfirmed {
			return "brief it with bridge_send(target=" + t + ", message, " + waitArg(wait) + ")", true
		}
		if res.Status != bridge.StatusFailed {
			return pollFor(t, wait) + " collects its reply to the brief", true
		}
	case "bridge_interrupt":
		switch res.Status {
		case bridge.StatusInterrupted, bridge.StatusNotWorking, bridge.StatusUncertain:
			return "brief it with bridge_send(target=" + t + ", message); bridge_roster shows its status", true
		}
	case "bridge_broadcast":
		return "nothing to do: everyone bound has a copy; replies, if any, are held for you (bridge_poll)", true
	case "bridge_history":
		return "nothing to do: history changes nothing; bridge_poll takes messages still held for you", true
	}
	return "", false
}

// statusNext is the next step that follows from the status alone.
func statusNext(res *bridge.Result, wait time.Duration) string {
	t := res.Target
	switch res.Status {
	case bridge.StatusConfirmed, bridge.StatusInjected, bridge.StatusSubmitted:
		return "nothing to do now: a reply, if one comes, is held for you: " + pollFor(t, wait) + " waits for it"
	case bridge.StatusUncertain:
		return "the brief was typed but its turn was not seen starting: bridge_roster shows the worker's status; " + pollFor(t, wait) + " waits for its reply"
	case bridge.StatusReplied:
		return "read the reply in messages; brief again with bridge_send(target=" + t + ", message), or bridge_stop(target=" + t + ") when its work is done"
	case bridge.StatusAnswered:
		return "carry on with the answer in messages"
	case bridge.StatusDelivered:
		return "nothing to do: the worker has your answer; its reply is held for you: " + pollFor(t, wait) + " waits for it"
	case bridge.StatusNoWaiter:
		return "nobody was waiting for your question: decide yourself, or report it with bridge_send(target=" + t + ", message)"
	case bridge.StatusTooLate, bridge.StatusAlreadyAnswered:
		return "that turn takes no answer now: send an ordinary bridge_send(target=" + t + ", message) if it still matters"
	case bridge.StatusAbandoned:
		return "the other side went away: bridge_roster shows whether " + t + " is still here"
	case bridge.StatusExpired:
		return "ask again with bridge_ask(question) if you still need the answer"
	case bridge.StatusFailed:
		return "nothing was delivered: do what the reason says, then call again"
	case bridge.StatusDrained:
		return "nothing else matches: " + pollFor("", wait) + " waits for the next message"
	case bridge.StatusPeeked:
		return "nothing was consumed: bridge_poll (without peek) takes these messages"
	case bridge.StatusEmpty:
		return "nothing held: " + pollFor("", wait) + " waits for the next message"
	case bridge.StatusStopped:
		return "nothing to do: the worker is gone"
	}
	return "bridge_roster shows who is here; bridge_poll takes messages held for you"
}

// errorResult is a tool error the model can act on: isError, the reason
// and the next step in structuredContent and, in the same words, in the
// text.
func errorResult(reason, next string) *mcpgo.CallToolResult {
	res := &bridge.Result{Status: StatusError, Reason: reason, Next: next}
	r := mcpgo.NewToolResultStructured(res, summary(res))
	r.IsError = true
	return r
}

// errorNext is what to do after tool refused a call with a sentence that
// says why.
func errorNext(tool string) string {
	return "do what the reason says, then call " + tool + " again"
}
