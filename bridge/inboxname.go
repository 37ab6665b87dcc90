package bridge

// InboxNamer is a transport whose broker inboxes are not all named
// InboxQueueName: a broker's quorum inboxes are agent.<gid>.inbox.v3.
// Reports (dead letters, FAILED reasons) name the queue it says.
type InboxNamer interface {
	InboxQueue(gid string) string
}

// inboxQueue is the name of gid's inbox on this core's transport.
func (c *Core) inboxQueue(gid string) string {
	if n, ok := c.tr.(InboxNamer); ok {
		return n.InboxQueue(gid)
	}
	return InboxQueueName(gid)
}
