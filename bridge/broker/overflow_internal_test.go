package broker

import (
	"strings"
	"testing"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/herdbridge/herdbridge/bridge"
)

// TestServerInfoChoosesOverflow: the broker's product, from the server
// properties of connection.start (any type, any value), picks what a full
// inbox does: reject-publish on LavinMQ (which treats reject-publish-dlx
// as drop-head), reject-publish-dlx on RabbitMQ and on anything that does
// not say; a configured mode wins either way.
func TestServerInfoChoosesOverflow(t *testing.T) {
	for _, tc := range []struct {
		name   string
		props  amqp.Table
		forced string
		want   ServerInfo
	}{
		{"RabbitMQ", amqp.Table{"product": "RabbitMQ", "version": "3.10.8", "cluster_name": "rabbit@mq1"}, "", ServerInfo{Product: "RabbitMQ", Version: "3.10.8", Overflow: OverflowRejectPublishDLX, ClusterName: "rabbit@mq1"}},
		{"LavinMQ", amqp.Table{"product": "LavinMQ", "version": "2.0.2", "platform": "Crystal"}, "", ServerInfo{Product: "LavinMQ", Version: "2.0.2", Overflow: OverflowRejectPublish}},
		{"LavinMQ as bytes, other case", amqp.Table{"product": []byte("lavinmq")}, "", ServerInfo{Product: "lavinmq", Version: "", Overflow: OverflowRejectPublish}},
		{"nothing said", nil, "", ServerInfo{Product: "", Version: "", Overflow: OverflowRejectPublishDLX}},
		{"product of the wrong type", amqp.Table{"product": int32(7)}, "", ServerInfo{Product: "", Version: "", Overflow: OverflowRejectPublishDLX}},
		{"forced on RabbitMQ", amqp.Table{"product": "RabbitMQ"}, OverflowRejectPublish, ServerInfo{Product: "RabbitMQ", Version: "", Overflow: OverflowRejectPublish}},
		{"forced on LavinMQ", amqp.Table{"product": "LavinMQ"}, OverflowRejectPublishDLX, ServerInfo{Product: "LavinMQ", Version: "", Overflow: OverflowRejectPublishDLX}},
	} {
		if got := serverInfo(tc.props, tc.forced); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	long := serverInfo(amqp.Table{"product": strings.Repeat("é", 5000) + "\x1b[2J", "version": "1.0\n\u202eevil"}, "")
	if len(long.Product) > 64 || !utf8.ValidString(long.Product) || long.Version != "1.0evil" {
		t.Errorf("server text not bounded and printable: %d bytes, version %q", len(long.Product), long.Version)
	}
}

// TestInboxArgsOverflow: an inbox with a cap is declared with the chosen
// overflow and always with the dead-letter exchange (TTL expiry and
// rejects still dead-letter under reject-publish).
func TestInboxArgsOverflow(t *testing.T) {
	for _, mode := range []string{OverflowRejectPublishDLX, OverflowRejectPublish} {
		a := inboxArgs(bridge.InboxSpec{MaxLength: 10}, mode, QueueTypeClassic)
		if a["x-overflow"] != mode || a["x-max-length"] != int64(10) || a["x-dead-letter-exchange"] != ExchangeDLX {
			t.Errorf("%s: %v", mode, a)
		}
	}
	if a := inboxArgs(bridge.InboxSpec{}, OverflowRejectPublish, QueueTypeClassic); a["x-overflow"] != nil {
		t.Errorf("an uncapped inbox has an overflow: %v", a)
	}
}

// TestParseOverflow: the configuration's brokerOverflow.
func TestParseOverflow(t *testing.T) {
	for in, want := range map[string]string{"": "", "auto": "", "reject-publish": OverflowRejectPublish, "reject-publish-dlx": OverflowRejectPublishDLX} {
		if got, err := ParseOverflow(in); err != nil || got != want {
			t.Errorf("ParseOverflow(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseOverflow("drop-head"); err == nil {
		t.Error("drop-head accepted: it drops messages in silence")
	}
}
