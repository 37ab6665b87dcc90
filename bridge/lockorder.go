package bridge

import "sync"

// The lock order (doc.go, the only copy), as types: each mutex the
// order names is one of these instead of a bare sync.Mutex. In an ordinary
// build they are sync.Mutex and nothing more (Lock and Unlock are the
// embedded ones). In a -race build (lockorder_race.go) Lock first checks
// the order against the locks the calling goroutine already holds and
// panics on an inversion, before it can deadlock: the race-enabled tests
// check the order on every path they run.
type (
	regMutex  struct{ sync.Mutex } // Core.regMu
	pubMutex  struct{ sync.Mutex } // presence.pub
	entMutex  struct{ sync.Mutex } // an entity's mu (entState.mu)
	leafMutex struct{ sync.Mutex } // every leaf lock doc.go lists
)

// lockLevel is a place in the order, in doc.go's sequence: a goroutine
// takes a lock only while every lock it holds has a lower level.
type lockLevel uint8

const (
	levelReg lockLevel = iota + 1
	levelPub
	levelEnt
	levelLeaf
)

func (l lockLevel) String() string {
	return [...]string{"?", "regMu", "presence.pub", "an entity's mu", "a leaf lock"}[l]
}
