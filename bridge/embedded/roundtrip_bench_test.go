package embedded

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herdbridge/herdbridge/bridge"
)

// BenchmarkPublishDeliverAck is one message's round trip through the
// transport alone: a durable publish, its delivery, its ack.
func BenchmarkPublishDeliverAck(b *testing.B) {
	tr, err := Open(filepath.Join(b.TempDir(), "t.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	gid := uuid.NewString()
	if err := tr.DeclareInbox(context.Background(), gid, bridge.InboxSpec{MaxLength: 1000}); err != nil {
		b.Fatal(err)
	}
	got := make(chan bridge.Delivery, 1)
	sub, err := tr.Consume(context.Background(), gid, 8, func(d bridge.Delivery) { got <- d })
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Cancel()
	for b.Loop() {
		now := time.Now()
		e := &bridge.Envelope{V: bridge.Version, Kind: bridge.KindReply, MsgID: uuid.NewString(), TraceID: uuid.NewString(),
			From: uuid.NewString(), To: gid, Host: "h", TS: now, ExpiresAt: now.Add(time.Hour), Body: []byte("done")}
		if err := tr.Publish(context.Background(), gid, e, true); err != nil {
			b.Fatal(err)
		}
		if err := (<-got).Acker.Ack(); err != nil {
			b.Fatal(err)
		}
	}
}
