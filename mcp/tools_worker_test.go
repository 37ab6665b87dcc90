package mcp

import (
	"encoding/base64"
	"slices"
	"testing"

	"github.com/herdbridge/herdbridge/bridge"
)

// rosterCalled stands for "the core's roster was read" (Roster takes no
// request).
const rosterCalled = "Roster()"

// TestRosterTool: bridge_roster, whose results and errors alike have the
// roster's shape (hosts and entities arrays, never null): a summary by
// default, a page of the entities that match with a filter or list=true.
func TestRosterTool(t *testing.T) {
	lead := bridge.EntityView{Entity: bridge.Entity{GID: caller, Name: "lead", Host: "h1", Role: bridge.RolePrimary, Groups: []string{"a", "b"}}, Held: 2, Status: "idle"}
	w := bridge.EntityView{Entity: bridge.Entity{GID: "g2", Name: "w", Host: "h2", Role: bridge.RoleWorker, Groups: []string{"b"}}, Status: "working"}
	hosts := []bridge.HostView{{Host: "h1", Local: true, Profiles: []string{"reviewer", "coder"}},
		{Host: "h2", Profiles: []string{}, Trust: bridge.TrustOneWay, Why: "h2 does not trust h1: run herdbridge keys trust there"}}
	roster := bridge.RosterView{Hosts: hosts, Entities: []bridge.EntityView{lead, w}}
	boss := bridge.EntityView{Entity: bridge.Entity{GID: "g1", Name: "boss", Host: "h1", Role: bridge.RolePrimary}, Status: "idle"}
	me := bridge.EntityView{Entity: bridge.Entity{GID: caller, Name: "me", Host: "h1", Role: bridge.RoleWorker}, Status: "idle"}
	w3 := bridge.EntityView{Entity: bridge.Entity{GID: "g3", Name: "w3", Host: "h1", Role: bridge.RoleWorker}, Status: "idle", Waiting: true}
	circle := bridge.Circle{Lead: caller, Team: []string{"g2", "gone"}, Recent: []string{"g2"}}
	wLine := peerLine{Name: "w", Host: "h2", GID: "g2", Role: bridge.RoleWorker, Status: "working"}
	next := errorNext("bridge_roster")
	const h1Line, h2Line = "host h1  profiles: reviewer, coder\n", "host h2  profiles:   trust: one-way (h2 does not trust h1: run herdbridge keys trust there)\n"
	const leadLine, wLineText = "lead@h1  primary  idle  held=2 groups=a,b\n", "w@h2  worker  working  held=0 groups=b\n"
	runTool(t, "bridge_roster", []toolCase{
		{name: "a summary by default", args: `{}`, roster: roster, circle: circle, want: rosterCalled,
			text: "roster summary: 2 entities on 2 hosts; bridge_roster(host=…, role=…, group=…, query=…) lists those that match, list=true lists everyone, a page at a time\n" +
				"host h1 (this host)  entities=1  profiles: reviewer, coder\n" +
				"host h2  entities=1  profiles:   trust: one-way (h2 does not trust h1: run herdbridge keys trust there)\n" +
				"roles: primary 1, worker 1\nstatuses: idle 1, working 1\n" +
				"you:\n  lead@h1  primary  idle  held=2\n" +
				"your team (lead lead@h1):\n  w@h2  worker  working  held=0\n" +
				"you talked with lately (newest first):\n  w@h2  worker  working  held=0\nnext: " + rosterNext,
			sc: map[string]any{"hosts": []any{}, "entities": []any{}, "total": 2, "next": rosterNext, "summary": rosterSummary{
				Hosts: []hostCount{{Host: "h1", Local: true, Entities: 1, Profiles: []string{"reviewer", "coder"}},
					{Host: "h2", Entities: 1, Profiles: []string{}, Trust: bridge.TrustOneWay, Why: hosts[1].Why}},
				Roles: []tally{{"primary", 1}, {"worker", 1}}, Statuses: []tally{{"idle", 1}, {"working", 1}},
				You: ptr(peerOf(&lead)), Lead: "lead@h1", Team: []peerLine{wLine}, Recent: []peerLine{wLine}}}},
		{name: "a worker's team: its lead and the lead's other workers; who is gone from the roster is left out", args: `{}`, want: rosterCalled,
			roster: bridge.RosterView{Hosts: hosts, Entities: []bridge.EntityView{boss, me, w3}},
			circle: bridge.Circle{Lead: "g1", Team: []string{"g3", caller, "gone"}, Recent: []string{"gone", "g1"}},
			has:    []string{"your team (lead boss@h1):\n  boss@h1  primary  idle  held=0\n  w3@h1  worker  idle  held=0  waiting\nyou talked with lately (newest first):\n  boss@h1  primary  idle  held=0\n"},
			sc: map[string]any{"summary": map[string]any{"hosts": []hostCount{{Host: "h1", Local: true, Entities: 3, Profiles: []string{"reviewer", "coder"}}, {Host: "h2", Profiles: []string{}, Trust: bridge.TrustOneWay, Why: hosts[1].Why}},
				"roles": []tally{{"worker", 2}, {"primary", 1}}, "statuses": []tally{{"idle", 3}},
				"you": peerOf(&me), "lead": "boss@h1", "team": []peerLine{peerOf(&boss), peerOf(&w3)}, "recent": []peerLine{peerOf(&boss)}}}},
		{name: "a worker on no brief: its lead is the primary it last talked with", args: `{}`, want: rosterCalled,
			roster: bridge.RosterView{Hosts: hosts, Entities: []bridge.EntityView{boss, me, w3}},
			circle: bridge.Circle{Recent: []string{"g3", "g1"}},
			has:    []string{"your team (lead boss@h1):\n  boss@h1  primary  idle  held=0\nyou talked with lately (newest first):\n  w3@h1"}},
		{name: "list=true: everyone, a page", args: `{"list":true}`, roster: roster, want: rosterCalled,
			text: "entities 1-2 of 2 that match (by host, name, gid)\n" + h1Line + h2Line + leadLine + wLineText + "next: " + rosterNext,
			sc:   map[string]any{"hosts": hosts, "entities": []bridge.EntityView{lead, w}, "total": 2, "next": rosterNext}},
		{name: "host", args: `{"host":"h2"}`, roster: roster, want: rosterCalled,
			text: "entities 1-1 of 1 that match host=h2 (by host, name, gid)\n" + h2Line + wLineText + "next: " + rosterNext,
			sc:   map[string]any{"hosts": hosts[1:], "entities": []bridge.EntityView{w}, "total": 1}},
		{name: "role", args: `{"role":"primary"}`, roster: roster, want: rosterCalled,
			sc: map[string]any{"hosts": hosts[:1], "entities": []bridge.EntityView{lead}, "total": 1}},
		{name: "group", args: `{"group":"b"}`, roster: roster, want: rosterCalled,
			sc: map[string]any{"entities": []bridge.EntityView{lead, w}}},
		{name: "query, any case, on name, host, role or group", args: `{"query":"WOR"}`, roster: roster, want: rosterCalled,
			sc: map[string]any{"entities": []bridge.EntityView{w}}},
		{name: "query on a group", args: `{"query":"a"}`, roster: roster, want: rosterCalled,
			sc: map[string]any{"entities": []bridge.EntityView{lead}}},
		{name: "filters combine", args: `{"group":"b","host":"h1"}`, roster: roster, want: rosterCalled,
			sc: map[string]any{"entities": []bridge.EntityView{lead}}},
		{name: "a host with nobody here: the host, no entity", args: `{"host":"H3"}`, want: rosterCalled,
			roster: bridge.RosterView{Hosts: append(slices.Clone(hosts), bridge.HostView{Host: "h3", Profiles: []string{"coder"}}), Entities: roster.Entities},
			sc:     map[string]any{"entities": []bridge.EntityView{}, "hosts": []bridge.HostView{{Host: "h3", Profiles: []string{"coder"}}}, "total": 0}},
		{name: "a host with nobody: an empty array, not null", args: `{"host":"h9"}`, roster: roster, want: rosterCalled,
			text: "no entities past the cursor: 0 match host=h9\nnext: " + rosterNext,
			sc:   map[string]any{"entities": []bridge.EntityView{}, "hosts": []any{}}},
		{name: "max", args: `{"list":true,"max":1}`, roster: roster, want: rosterCalled,
			has: []string{"entities 1-1 of 2"},
			sc:  map[string]any{"entities": []bridge.EntityView{lead}, "cursor": rosterCursor(keyOf(&lead))}},
		{name: "an unknown argument", args: `{"hots":"h2"}`, isError: true, reason: `unknown argument "hots": this tool takes cursor, group, host, list, max, query, role`,
			text: "status: error — unknown argument \"hots\": this tool takes cursor, group, host, list, max, query, role\nnext: " + next,
			sc:   map[string]any{"hosts": []any{}, "entities": []any{}, "next": next}},
		{name: "host not a string", args: `{"host":2}`, isError: true, reason: "host must be a string"},
		{name: "not a role", args: `{"role":"boss"}`, isError: true, reason: "role boss is not a role: use primary, worker or orchestrator"},
		{name: "max out of range", args: `{"max":0}`, isError: true, reason: "max must be between 1 and 200"},
		{name: "a bad cursor", args: `{"cursor":"not-a-cursor"}`, isError: true, reason: badCursor,
			sc: map[string]any{"hosts": []any{}, "entities": []any{}, "next": next}},
		{name: "a cursor of another form", args: `{"cursor":"` + base64.RawURLEncoding.EncodeToString([]byte("r2\x00h\x00n\x00g")) + `"}`, isError: true, reason: badCursor},
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
