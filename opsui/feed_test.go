package opsui

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
)

func hop(i int) bridge.Event {
	return bridge.Event{At: time.Unix(int64(i), 0), Hop: bridge.HopAccept, Kind: bridge.KindSend, MsgID: fmt.Sprintf("m%d", i), From: "a", To: "b"}
}

// TestFeedStalledReaderCostsNothing: a subscriber that never reads holds
// one pending wake-up however much traffic passes, and when it reads
// again it gets the ring's newest items and the count it missed.
func TestFeedStalledReaderCostsNothing(t *testing.T) {
	f := NewFeed(8, 2)
	s, err := f.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 100; i++ {
		f.Observe(hop(i))
	}
	if n := len(s.wake); n != 1 {
		t.Fatalf("pending wake-ups %d, want 1", n)
	}
	items, missed := f.Since(0, 64)
	if missed != 92 || len(items) != 8 || items[0].Seq != 93 || items[7].MsgID != "m100" {
		t.Fatalf("Since(0) = %d items from seq %d, missed %d; want 8 from 93, missed 92", len(items), items[0].Seq, missed)
	}
	items, missed = f.Since(98, 64)
	if missed != 0 || len(items) != 2 || items[0].Seq != 99 {
		t.Fatalf("Since(98) = %+v, missed %d", items, missed)
	}
	if items, _ := f.Since(100, 64); len(items) != 0 {
		t.Fatalf("Since(last) = %d items, want none", len(items))
	}
	if items, _ := f.Since(95, 2); len(items) != 2 || items[1].Seq != 97 {
		t.Fatalf("Since(95, max 2) = %+v", items)
	}
}

// TestFeedCapsStreams: past its cap a subscribe is refused, and a slot
// comes back when a subscriber leaves.
func TestFeedCapsStreams(t *testing.T) {
	f := NewFeed(8, 2)
	a, _ := f.Subscribe()
	if _, err := f.Subscribe(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Subscribe(); !errors.Is(err, ErrTooManyStreams) {
		t.Fatalf("third subscribe: %v, want ErrTooManyStreams", err)
	}
	f.Unsubscribe(a)
	if _, err := f.Subscribe(); err != nil {
		t.Fatalf("after one left: %v", err)
	}
	if f.Streams() != 2 {
		t.Fatalf("streams %d", f.Streams())
	}
}

// TestFeedKeepsRefusalsApart: traffic that turns the ring over does not
// push out the latest refusals, which come newest first.
func TestFeedKeepsRefusalsApart(t *testing.T) {
	f := NewFeed(4, 1)
	for i := 0; i < DefaultRefusalKeep+5; i++ {
		f.Observe(bridge.Event{Hop: bridge.HopRefuse, MsgID: fmt.Sprintf("r%d", i), Status: "bad-signature"})
	}
	for i := 0; i < 50; i++ {
		f.Observe(hop(i))
	}
	r := f.Refusals()
	if len(r) != DefaultRefusalKeep || r[0].MsgID != fmt.Sprintf("r%d", DefaultRefusalKeep+4) || r[len(r)-1].MsgID != "r5" {
		t.Fatalf("refusals: %d, first %s, last %s", len(r), r[0].MsgID, r[len(r)-1].MsgID)
	}
}

// TestItemCarriesMetadataOnly: an Item is built from an Event's fields
// alone, with the latency in milliseconds and the entity as recipient
// when the event names no To.
func TestItemCarriesMetadataOnly(t *testing.T) {
	it := itemOf(bridge.Event{Hop: bridge.HopInject, Entity: "gid-w", Latency: 1500 * time.Microsecond, Status: "typed"})
	if it.To != "gid-w" || it.LatencyMs == nil || *it.LatencyMs != 1.5 || it.Status != "typed" {
		t.Fatalf("item %+v", it)
	}
	if it := itemOf(bridge.Event{Hop: bridge.HopHold}); it.LatencyMs != nil {
		t.Fatal("an unmeasured latency is reported")
	}
}
