package bridge

// Priority "next" (bridge_send priority, bridge_interrupt's message): a
// brief that jumps its worker's pane queue. It travels as the SEND's
// signed priority header; the worker's gateway puts it in the pane queue's
// next lane (store.QueuedBrief.Next), typed as soon as the agent is ready,
// before every brief that was waiting — never before one whose typing
// began, whose text may still sit in the composer. It interrupts nothing:
// a working agent finishes its turn first (bridge_interrupt stops it).

// PriorityNext is the one priority a SEND may carry.
const PriorityNext = "next"

// checkPriority refuses a priority other than "" and "next", and one on
// a message that is not a brief to a worker.
func checkPriority(p string, target Entity, turnID string) error {
	switch {
	case p == "":
		return nil
	case p != PriorityNext:
		return userErr("priority %s is not valid: the only priority is %q (type this brief before the briefs already queued for the worker)", Clip(p), PriorityNext)
	case turnID != "":
		return userErr("priority %q is for briefs, not answers: drop it when answering with turn_id", PriorityNext)
	case target.Role != RoleWorker:
		return userErr("priority %q jumps a worker's brief queue: %s is a %s, whose messages are held in order for bridge_poll", PriorityNext, target.Addr(), target.Role)
	}
	return nil
}
