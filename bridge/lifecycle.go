package bridge

// lifecycle is the part of an entity's record that says where it is between
// attaching its inbox and being removed: the transport consumer of its
// inbox, why it is being stopped (the sentence its counterparts' ABANDONED
// carries instead of the generic one), and whether it has been dropped from
// the registry, after which deliveries treat it as gone. Its entState's mu
// guards it; every method runs with mu held. removed only ever turns true
// (setRemoved, removal.go); the consumer is attached and taken back here
// only, so that exactly one caller cancels it.
type lifecycle struct {
	sub     Subscription
	removed bool
	goneWhy string
}

// setRemoved records that the entity left the registry.
func (l *lifecycle) setRemoved() { l.removed = true }

// setGoneWhy records why the entity is being removed ("" when a stop that
// said so failed: the generic sentence again).
func (l *lifecycle) setGoneWhy(why string) { l.goneWhy = why }

// setSub records sub as the inbox's consumer.
func (l *lifecycle) setSub(sub Subscription) { l.sub = sub }

// takeSub returns the inbox's consumer, nil when none is attached, and
// forgets it: the caller cancels it.
func (l *lifecycle) takeSub() Subscription {
	sub := l.sub
	l.sub = nil
	return sub
}
