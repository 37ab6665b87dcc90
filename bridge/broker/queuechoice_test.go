package broker_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/herdbridge/herdbridge/bridge/broker"
)

// TestDecideQueueType: the queue-type rule, without a broker.
func TestDecideQueueType(t *testing.T) {
	three := []string{"amqp://a:5672", "amqp://b:5672", "amqp://c:5672"}
	rabbit := func(url, cluster string) broker.NodeAnswer {
		return broker.NodeAnswer{URL: url, Product: "RabbitMQ", ClusterName: cluster}
	}
	down := func(url string) broker.NodeAnswer { return broker.NodeAnswer{URL: url, Err: errors.New("refused")} }
	all := []broker.NodeAnswer{rabbit(three[0], "c1"), rabbit(three[1], "c1"), rabbit(three[2], "c1")}
	cases := []struct {
		name                   string
		configured, remembered string
		urls                   []string
		answers                []broker.NodeAnswer
		want, why              string
	}{
		{"one URI", "auto", "", three[:1], all[:1], "classic", "1 broker URI"},
		{"two URIs", "auto", "", three[:2], all[:2], "classic", "2 broker URI"},
		{"three URIs, one cluster", "auto", "", three, all, "quorum", `cluster "c1"`},
		{"three URIs repeated are one", "auto", "", []string{three[0], three[0] + "/", three[0]}, all[:1], "classic", "1 broker URI"},
		{"cluster names disagree", "auto", "", three, []broker.NodeAnswer{rabbit(three[0], "c1"), rabbit(three[1], "c2"), rabbit(three[2], "c1")}, "classic", "different cluster names"},
		{"a majority answers", "auto", "", three, []broker.NodeAnswer{rabbit(three[0], "c1"), down(three[1]), rabbit(three[2], "c1")}, "quorum", "2 of 3"},
		{"a minority answers", "auto", "", three, []broker.NodeAnswer{rabbit(three[0], "c1"), down(three[1]), down(three[2])}, "classic", "no majority"},
		{"no cluster name", "auto", "", three, []broker.NodeAnswer{rabbit(three[0], ""), rabbit(three[1], ""), rabbit(three[2], "")}, "classic", "no cluster_name"},
		{"LavinMQ", "auto", "", three, []broker.NodeAnswer{{URL: three[0], Product: "LavinMQ"}, down(three[1]), down(three[2])}, "classic", "LavinMQ"},
		{"LavinMQ beats an explicit quorum", "quorum", "", three[:1], []broker.NodeAnswer{{URL: three[0], Product: "LavinMQ"}}, "classic", "LavinMQ"},
		{"remembered quorum while nodes are down", "auto", "quorum", three, []broker.NodeAnswer{rabbit(three[0], "c1"), down(three[1]), down(three[2])}, "quorum", "remembered"},
		{"remembered classic on a cluster", "auto", "classic", three, all, "classic", "remembered"},
		{"explicit quorum on one URI", "quorum", "", three[:1], nil, "quorum", "configured"},
		{"explicit classic beats memory", "classic", "quorum", three, all, "classic", "configured"},
		{"explicit quorum beats memory", "quorum", "classic", three[:1], nil, "quorum", "configured"},
	}
	for _, c := range cases {
		got := broker.DecideQueueType(c.configured, c.remembered, c.urls, c.answers)
		if got.Type != c.want || !strings.Contains(got.Why, c.why) {
			t.Errorf("%s: %+v, want %s (%q)", c.name, got, c.want, c.why)
		}
	}
}

func TestParseQueueType(t *testing.T) {
	for in, want := range map[string]string{"": "auto", "auto": "auto", "Quorum": "quorum", " classic ": "classic"} {
		if got, err := broker.ParseQueueType(in); err != nil || got != want {
			t.Errorf("ParseQueueType(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := broker.ParseQueueType("stream"); err == nil {
		t.Error("stream accepted")
	}
}
