package bridge

import (
	"runtime"
	"weak"
)

// stillReachable collects garbage and counts the refs whose object
// survived: what something the test keeps alive still points at.
func stillReachable[T any](refs []weak.Pointer[T]) int {
	runtime.GC()
	runtime.GC()
	n := 0
	for _, r := range refs {
		if r.Value() != nil {
			n++
		}
	}
	return n
}
