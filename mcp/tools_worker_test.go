package mcp

import (
	"testing"

	"github.com/herdbridge/herdbridge/bridge"
)

// rosterCalled stands for "the core's roster was read" (Roster takes no
// request).
const rosterCalled = "Roster()"

// TestRosterTool: bridge_roster, whose results and errors alike have the
// roster's shape (hosts and entities arrays, never null).
func TestRosterTool(t *testing.T) {
	lead := bridge.EntityView{Entity: bridge.Entity{GID: "g1", Name: "lead", Host: "h1", Role: bridge.RolePrimary, Groups: []string{"a", "b"}}, Held: 2, Status: "idle"}
	w := bridge.EntityView{Entity: bridge.Entity{GID: "g2", Name: "w", Host: "h2", Role: bridge.RoleWorker}, Status: "working"}
	hosts := []bridge.HostView{{Host: "h1", Local: true, Profiles: []string{"reviewer", "coder"}},
		{Host: "h2", Profiles: []string{}, Trust: bridge.TrustOneWay, Why: "h2 does not trust h1: run herdbridge keys trust there"}}
	roster := bridge.RosterView{Hosts: hosts, Entities: []bridge.EntityView{lead, w}}
	next := errorNext("bridge_roster")
	runTool(t, "bridge_roster", []toolCase{
		{name: "everyone", args: `{}`, roster: roster, want: rosterCalled,
			text: "host h1  profiles: reviewer, coder\nhost h2  profiles:   trust: one-way (h2 does not trust h1: run herdbridge keys trust there)\n" +
				"lead@h1  primary  idle  held=2 groups=a,b\nw@h2  worker  working  held=0 groups=\nnext: " + rosterNext,
			sc: map[string]any{"hosts": hosts, "entities": []bridge.EntityView{lead, w}, "next": rosterNext}},
		{name: "one host", args: `{"host":"h2"}`, roster: roster, want: rosterCalled,
			has: []string{"\nw@h2  worker  working"}, sc: map[string]any{"hosts": hosts, "entities": []bridge.EntityView{w}}},
		{name: "a host with nobody: an empty array, not null", args: `{"host":"h9"}`, roster: roster, want: rosterCalled,
			sc: map[string]any{"entities": []bridge.EntityView{}}},
		{name: "an unknown argument", args: `{"hots":"h2"}`, isError: true, reason: `unknown argument "hots": this tool takes host`,
			text: "status: error — unknown argument \"hots\": this tool takes host\nnext: " + next,
			sc:   map[string]any{"hosts": []any{}, "entities": []any{}, "next": next}},
		{name: "host not a string", args: `{"host":2}`, isError: true, reason: "host must be a string"},
	})
}

// TestSpawnTool: bridge_spawn.
func TestSpawnTool(t *testing.T) {
	phases := []bridge.SpawnPhase{{Phase: "pane", MS: 12}, {Phase: "ready", MS: 340}}
	runTool(t, "bridge_spawn", []toolCase{
		{name: "ready, no brief", args: `{"profile":"coder"}`,
			res:  &bridge.Result{Status: bridge.StatusConfirmed, SpawnID: "g3", Target: "coder-ab12@h1", Phases: phases},
			want: bridge.SpawnRequest{Profile: "coder"},
			text: "status: confirmed (target coder-ab12@h1)\nphases: pane 12ms, ready 340ms\nnext: brief it with bridge_send(target=coder-ab12@h1, message, wait_s=45)",
			sc:   map[string]any{"spawnId": "g3", "phases": phases}},
		{name: "every argument", args: `{"host":"h2","profile":"coder","name":"c1","brief":"go","spawn_id":"s1","cwd":"/src/x","repo":"x","worktree":true,"model":"m","args":["--fast"]}`,
			res: &bridge.Result{Status: bridge.StatusSubmitted, Target: "c1@h2"},
			want: bridge.SpawnRequest{Host: "h2", Profile: "coder", Name: "c1", Brief: "go", SpawnID: "s1",
				Choice: bridge.SpawnChoice{Cwd: "/src/x", Repo: "x", Worktree: true, Model: "m", Args: []string{"--fast"}}},
			sc: map[string]any{"next": "bridge_poll(target=c1@h2, wait_s=45) collects its reply to the brief"}},
		{name: "refused past maxWorkers: failed, not a tool error", args: `{"profile":"coder"}`,
			res:  &bridge.Result{Status: bridge.StatusFailed, Reason: "profile coder has maxWorkers 4 and 4 run"},
			want: bridge.SpawnRequest{Profile: "coder"},
			text: "status: failed — profile coder has maxWorkers 4 and 4 run\nnext: nothing was delivered: do what the reason says, then call again"},
		{name: "args not a list", args: `{"profile":"coder","args":"--fast"}`, isError: true, reason: "args must be a value of another type"},
		{name: "worktree not a boolean", args: `{"profile":"coder","worktree":"yes"}`, isError: true, reason: "worktree must be true or false"},
		{name: "profile not a string", args: `{"profile":["coder"]}`, isError: true, reason: "profile must be a string",
			text: errText("profile must be a string", errorNext("bridge_spawn"))},
		{name: "the core refuses", args: `{"profile":"nope"}`, err: userErr("no profile nope on h1: bridge_roster lists them"),
			want: bridge.SpawnRequest{Profile: "nope"}, isError: true, reason: "no profile nope on h1: bridge_roster lists them"},
	})
}

// TestStopTool: bridge_stop.
func TestStopTool(t *testing.T) {
	runTool(t, "bridge_stop", []toolCase{
		{name: "stopped", args: `{"target":"w"}`, res: &bridge.Result{Status: bridge.StatusStopped, Target: "w@h2"},
			want: bridge.StopRequest{Target: "w"},
			text: "status: stopped (target w@h2)\nnext: nothing to do: the worker is gone"},
		{name: "every argument", args: `{"target":"w","reason":"done","close_pane":false,"stop_id":"s1"}`,
			want: bridge.StopRequest{Target: "w", Reason: "done", ClosePane: ptr(false), StopID: "s1"}},
		{name: "close_pane not a boolean", args: `{"target":"w","close_pane":"no"}`, isError: true, reason: "close_pane must be true or false"},
		{name: "an unknown argument", args: `{"target":"w","force":true}`, isError: true,
			reason: `unknown argument "force": this tool takes close_pane, reason, stop_id, target`,
			text:   errText(`unknown argument "force": this tool takes close_pane, reason, stop_id, target`, errorNext("bridge_stop"))},
		{name: "the core refuses", args: `{"target":"other"}`, err: userErr("a worker may stop only itself"),
			want: bridge.StopRequest{Target: "other"}, isError: true, reason: "a worker may stop only itself"},
	})
}

// TestInterruptTool: bridge_interrupt.
func TestInterruptTool(t *testing.T) {
	runTool(t, "bridge_interrupt", []toolCase{
		{name: "interrupted, with the next brief", args: `{"target":"w","message":"stop; do y"}`,
			res:  &bridge.Result{Status: bridge.StatusInterrupted, Target: "w@h2"},
			want: bridge.InterruptRequest{Target: "w", Message: "stop; do y"},
			text: "status: interrupted (target w@h2)\nnext: brief it with bridge_send(target=w@h2, message); bridge_roster shows its status"},
		{name: "not working", args: `{"target":"w"}`, res: &bridge.Result{Status: bridge.StatusNotWorking, Target: "w@h2"},
			want: bridge.InterruptRequest{Target: "w"}, sc: map[string]any{"status": "not_working"}},
		{name: "failed", args: `{"target":"w"}`, res: &bridge.Result{Status: bridge.StatusFailed, Target: "w@h2", Reason: "w has no herdr pane"},
			want: bridge.InterruptRequest{Target: "w"},
			text: "status: failed (target w@h2) — w has no herdr pane\nnext: nothing was delivered: do what the reason says, then call again"},
		{name: "message not a string", args: `{"target":"w","message":{"text":"x"}}`, isError: true, reason: "message must be a string"},
		{name: "an unknown argument", args: `{"target":"w","brief":"x"}`, isError: true, reason: `unknown argument "brief": this tool takes message, target`},
	})
}
