package broker

import (
	"fmt"
	"strings"
)

// NodeAnswer is what one configured broker URI said when probed (or
// that it did not answer).
type NodeAnswer struct {
	URL         string
	Product     string // connection.start's product
	ClusterName string // connection.start's cluster_name
	Err         error  // it did not answer
}

// QueueTypeChoice is the queue type a gateway uses and why (doctor,
// stats, the startup log).
type QueueTypeChoice struct {
	Type string `json:"type"`
	Why  string `json:"why"`
}

// quorumMinNodes is how many distinct broker URIs auto needs to choose
// quorum: a quorum queue on fewer nodes replicates nothing a node failure
// does not take with it.
const quorumMinNodes = 3

// DecideQueueType is the queue type rule (README "Queue types"): LavinMQ
// keeps classic whatever is asked (it has no quorum queues); an explicit
// classic or quorum wins; under auto a type remembered from an earlier
// start holds (a restart while a node is down must not flip it); else
// quorum when at least 3 distinct URIs are configured and a majority of
// them answer as RabbitMQ with one and the same cluster_name, classic
// otherwise. configured is ParseQueueType's result.
func DecideQueueType(configured, remembered string, urls []string, answers []NodeAnswer) QueueTypeChoice {
	for _, a := range answers {
		if a.Err == nil && strings.EqualFold(a.Product, "LavinMQ") {
			return QueueTypeChoice{QueueTypeClassic, "the broker is LavinMQ, which has no quorum queues"}
		}
	}
	if configured == QueueTypeClassic || configured == QueueTypeQuorum {
		return QueueTypeChoice{configured, "configured"}
	}
	if remembered == QueueTypeClassic || remembered == QueueTypeQuorum {
		return QueueTypeChoice{remembered, "auto: remembered from an earlier start (state dir)"}
	}
	n := len(distinct(urls))
	if n < quorumMinNodes {
		return QueueTypeChoice{QueueTypeClassic, fmt.Sprintf("auto: %d broker URI(s) configured, quorum needs at least %d", n, quorumMinNodes)}
	}
	return decideCluster(n, answers)
}

// decideCluster is auto's cluster check over n distinct URIs.
func decideCluster(n int, answers []NodeAnswer) QueueTypeChoice {
	names := map[string]int{}
	answered := 0
	for _, a := range answers {
		if a.Err != nil {
			continue
		}
		answered++
		if !strings.EqualFold(a.Product, "RabbitMQ") {
			return QueueTypeChoice{QueueTypeClassic, fmt.Sprintf("auto: %s answers as %q, not RabbitMQ", redact(a.URL), a.Product)}
		}
		names[a.ClusterName]++
	}
	if answered <= n/2 {
		return QueueTypeChoice{QueueTypeClassic, fmt.Sprintf("auto: only %d of %d broker nodes answered, no majority", answered, n)}
	}
	if len(names) != 1 {
		return QueueTypeChoice{QueueTypeClassic, fmt.Sprintf("auto: the %d nodes that answered report %d different cluster names", answered, len(names))}
	}
	for name := range names {
		if name == "" {
			return QueueTypeChoice{QueueTypeClassic, "auto: the nodes report no cluster_name"}
		}
		return QueueTypeChoice{QueueTypeQuorum, fmt.Sprintf("auto: %d of %d nodes answered as RabbitMQ cluster %q", answered, n, name)}
	}
	panic("unreachable")
}

// distinct is urls without blanks and repeats.
func distinct(urls []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, u := range urls {
		u = strings.TrimRight(strings.TrimSpace(u), "/")
		if u != "" && !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	return out
}
