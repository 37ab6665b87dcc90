package bridge

import (
	"sync"
	"time"
)

// Spawn phases: a spawn result lists the steps the spawn went through,
// each with the time since the spawn began, so a slow spawn says where
// its time went (the pane, the agent's start, its readiness, the brief).
const (
	PhaseWorktree     = "worktree created"
	PhasePaneCreated  = "pane created"
	PhaseAgentStarted = "agent started"
	PhaseReady        = "ready"
	PhaseRegistered   = "registered"
	PhaseSpawnSent    = "spawn sent" // a remote spawn: SPAWN published to the host
	PhaseBriefTyped   = "brief typed"
	PhaseBriefQueued  = "brief queued" // the brief waits in the pane's queue
)

// SpawnPhase is one step of a spawn and when it was passed, in
// milliseconds since the spawn began.
type SpawnPhase struct {
	Phase string `json:"phase"`
	MS    int64  `json:"ms"`
}

// phases records a spawn's phases; the pane starter may report from its
// own goroutine.
type phases struct {
	now   func() time.Time
	start time.Time
	mu    sync.Mutex
	list  []SpawnPhase
}

func newPhases(now func() time.Time) *phases { return &phases{now: now, start: now()} }

// passed records phase now.
func (p *phases) passed(phase string) {
	ms := p.now().Sub(p.start).Milliseconds()
	p.mu.Lock()
	p.list = append(p.list, SpawnPhase{Phase: phase, MS: ms})
	p.mu.Unlock()
}

// all lists the phases passed so far.
func (p *phases) all() []SpawnPhase {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]SpawnPhase(nil), p.list...)
}

// briefPhase records how the first brief went: typed, or queued in the pane.
func (p *phases) briefPhase(status string) {
	switch status {
	case StatusSubmitted, StatusUncertain, StatusInjected:
		p.passed(PhaseBriefTyped)
	case StatusQueued:
		p.passed(PhaseBriefQueued)
	}
}
