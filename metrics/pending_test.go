package metrics

import (
	"fmt"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

// Remembering a send allocates nothing once the bound is allocated: a
// send never answered cannot make the heap creep up while the ring fills
// (it cost ~200 B a send when the keys were kept as strings).
func TestPendingRemembersWithoutAllocating(t *testing.T) {
	p := newPending(1024)
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = receiptKey(fmt.Sprintf("msg-%06d", i))
	}
	at := time.Now()
	i := 0
	allocs := testing.AllocsPerRun(4096, func() {
		p.put(keys[i%len(keys)], at)
		i++
	})
	if allocs != 0 {
		t.Fatalf("%.2f allocations per remembered send, want 0", allocs)
	}
	if n := p.size(); n != 1024 {
		t.Fatalf("%d remembered, want the bound 1024", n)
	}
	got, what, ok := p.answered(bridge.Event{Kind: bridge.KindInjected, Corr: fmt.Sprintf("msg-%06d", 4095)})
	if !ok || what != "receipt" || !got.Equal(time.Unix(0, at.UnixNano())) {
		t.Fatalf("answered: %v %q %v", got, what, ok)
	}
}
