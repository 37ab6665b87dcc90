package split

import "github.com/herdbridge/herdbridge/bridge"

var _ bridge.InboxNamer = (*Transport)(nil)

// InboxQueue implements bridge.InboxNamer: the broker's name of gid's
// inbox (agent.<gid>.inbox.v3 on quorum queues), which the core's reports
// give.
func (t *Transport) InboxQueue(gid string) string {
	if n, ok := t.remote.(bridge.InboxNamer); ok {
		return n.InboxQueue(gid)
	}
	return bridge.InboxQueueName(gid)
}
