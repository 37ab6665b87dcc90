//go:build race

package bridge

import (
	"fmt"
	"runtime"
	"sync"
)

// The lock-order checker of the -race build. Each goroutine's held levels
// are kept in lockHeld, keyed by goroutine id (read off runtime.Stack's
// header: Go has no goroutine-local storage), only while it holds one.
// A lock is released by the goroutine that took it (taken and released in
// the same function): an Unlock on another goroutine panics too.

func (m *regMutex) Lock()    { lockTake(levelReg); m.Mutex.Lock() }
func (m *regMutex) Unlock()  { lockDrop(levelReg); m.Mutex.Unlock() }
func (m *pubMutex) Lock()    { lockTake(levelPub); m.Mutex.Lock() }
func (m *pubMutex) Unlock()  { lockDrop(levelPub); m.Mutex.Unlock() }
func (m *entMutex) Lock()    { lockTake(levelEnt); m.Mutex.Lock() }
func (m *entMutex) Unlock()  { lockDrop(levelEnt); m.Mutex.Unlock() }
func (m *leafMutex) Lock()   { lockTake(levelLeaf); m.Mutex.Lock() }
func (m *leafMutex) Unlock() { lockDrop(levelLeaf); m.Mutex.Unlock() }

var lockHeld sync.Map // goroutine id -> *[]lockLevel, in the order taken

// lockTake records that this goroutine takes a lock of level l, and panics
// if it holds one that may not be held while l is taken.
func lockTake(l lockLevel) {
	id := goroutineID()
	v, ok := lockHeld.Load(id)
	if !ok {
		v, _ = lockHeld.LoadOrStore(id, new([]lockLevel))
	}
	held := v.(*[]lockLevel)
	for _, h := range *held {
		if h >= l {
			panic(fmt.Sprintf("lock order (bridge/doc.go): taking %s while holding %s (held: %v)", l, h, *held))
		}
	}
	*held = append(*held, l)
}

// lockDrop records that this goroutine released a lock of level l.
func lockDrop(l lockLevel) {
	id := goroutineID()
	v, ok := lockHeld.Load(id)
	if !ok {
		panic(fmt.Sprintf("lock order: %s released by a goroutine that holds no lock", l))
	}
	held := v.(*[]lockLevel)
	for i := len(*held) - 1; i >= 0; i-- {
		if (*held)[i] == l {
			*held = append((*held)[:i], (*held)[i+1:]...)
			if len(*held) == 0 {
				lockHeld.Delete(id)
			}
			return
		}
	}
	panic(fmt.Sprintf("lock order: %s released by a goroutine that did not take it (held: %v)", l, *held))
}

// goroutineID parses "goroutine 123 [" at the head of this goroutine's stack.
func goroutineID() uint64 {
	var buf [32]byte
	b := buf[:runtime.Stack(buf[:], false)]
	var id uint64
	for _, c := range b[len("goroutine "):] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}
