// Package bridge is the transport-agnostic bridge core of a gateway: the
// entity registry, per-entity inboxes with their waiters and held messages,
// the ack models of SPEC §4, the envelope and verification of SPEC §3,
// presence and spawn. It owns the interfaces its neighbours implement —
// Transport (bridge/embedded, bridge/broker, bridge/split), Injector and
// PaneStarter (herdr), Nudger (mcp, herdr), Signer and Verifier (keys) —
// and knows nothing of MCP, HTTP or herdr: those call into Core, whose
// methods are the tools (Send, Ask, Poll, Spawn, Stop, Interrupt, …).
//
// # The map
//
// One noun a line: the files that hold it, and the one type that owns its
// state (a Core method where the noun is a call, not a record). Core
// (core.go) composes the owners, each with its own state and lock; Config
// (config.go) is everything it is wired with. An entity's record, entState,
// is made of parts whose methods alone write their fields (internal/arch
// checks it); they take no lock: the entity's mu guards them all.
//
//	noun            files                                            owner
//	entity          entstate.go, entity.go                           entState (Entity: what it is)
//	  held          heldset.go, held.go                              heldSet (heldMsg: one message)
//	  waiters       waiters.go, wait.go, waitcap.go                  waitList (Core.await: every blocking call)
//	  turns, ask    turns.go, ask.go, askanswer.go, missedask.go     turnState (askTurn, recvTurn)
//	  activity      activity.go                                      activity (sessions, grace, pane status)
//	  lifecycle     lifecycle.go                                     lifecycle (consumer, removed, why)
//	  tokens        token.go                                         tokenList
//	turn book       turnbook.go                                      turnBook (open turns, persisted)
//	registry        registry.go, register.go                         registry (by gid, name, token hash)
//	name claims     nameclaims.go                                    nameClaims (names of live stdio sessions)
//	removal, reap   removal.go, removalclaims.go, removallater.go, reap.go  leaving (removals in progress)
//	sweeper         sweep.go                                         Core.sweep (deadlines, expiry, reaping)
//	inbox           transport.go, inboxname.go, delay.go             Transport (it holds the inboxes)
//	arrival         deliver.go, provenance.go                        Core.deliver (verify, admit, handle)
//	verification    verify.go                                        gate (SPEC §3's checks; Signer, Verifier)
//	seen-set        seen.go                                          memory (seen keys, sender bindings)
//	seal            seal.go, envelope_seal.go                        sealBook (peers' HPKE keys)
//	envelope        envelope.go                                      Envelope
//	send, publish   send.go, publish.go, priority.go                 openSend (Core.publish: every publish)
//	broadcast       send.go                                          Core.Broadcast
//	requests        requests.go, requestbound.go, requestintent.go,  requests (idempotent calls, persisted)
//	                requestrepeat.go
//	results         results.go                                       Result (statuses, UserError)
//	poll            poll.go                                          Core.Poll
//	drain           drain.go, drainrelease.go, handover.go           heldSet (claims); Handover (ack waits)
//	budget          budget.go                                        budget (a result's bytes of bodies)
//	limits          limits.go, config.go, waitcap.go                 Config (defaults; the check* functions)
//	spill           spill.go                                         spiller
//	nudge           nudge.go                                         nudgeSet (Nudger: who is told)
//	pane queue      panequeue.go, panerunner.go, panerecover.go,     paneQueues (one runner goroutine a pane)
//	                panefiles.go, panewatch.go, forward.go
//	receipts        entstate.go, forward.go                          receiptBox (a waiting call's receipts)
//	ledger          ledger.go                                        ledger (briefs awaiting INJECTED/FAILED)
//	fate            fate.go, giveup.go, deadletter.go,               Core.reportUndelivered (the one door)
//	                deadnotice.go, noticelost.go, noticeretry.go,
//	                noticedelay.go
//	history         history*.go, bridge/history                      history.Log (opt-in transcript)
//	audit           audit*.go, bridge/audit                          audit.Log (the gateway opens it)
//	observe         observe.go                                       Observer (every hop an Event)
//	trace           trace.go, tracetimeline.go, bridge/audit (Scan),   traceWaits
//	                tracewire.go
//	presence        presence.go, presenceclean.go, roster.go,        presence (other hosts' entities)
//	                remoteentity.go
//	recent peers    recentpeers.go                                   recentPeers (who each entity last talked with)
//	presence sync   presencesync.go, presenceask.go                  presence (hostSync per host; ownSync under pub)
//	peers           peers.go                                         peerState (trust, clock skew per host)
//	role policy     rolepolicy.go                                    RolePolicy (who may brief whom)
//	control         control.go                                       Core.onControl (control.<host>)
//	spawn           spawn.go, spawnremote.go, spawnpolicy.go,        spawnClaims (spawnSlots: the limits)
//	                spawnslots.go, spawnphases.go, worktree.go
//	stop            stop.go, control.go (across hosts)               Core.Stop
//	interrupt       interrupt.go, control.go (across hosts)          Core.Interrupt (Interrupter: herdr's Escape)
//	locks           doc.go (below), lockorder.go, lockorder_race.go  regMutex, pubMutex, entMutex, leafMutex
//
// Storage is bridge/store (bbolt, one state.db): the core keeps its
// records there through the owners above and converts to the store's own
// record types. An entity's messages in flight are its transport's
// (bridge/embedded on one host; bridge/split with bridge/broker across
// hosts).
//
// # Lock order
//
// The only copy; every other comment points here:
//
//	regMu → presence.pub → an entity's mu (entState.mu) → one leaf lock
//
// Leaf locks (never held while another lock is taken): the registry's,
// the gate's, memory's (seen-set), the ledger's, the requests', the
// turn book's and the store's own (turn records are written under an
// entity's mu), presence's, the nudge set's, spawn claims', spawn slots',
// name claims' (nameClaims.mu), the pane queues', the spiller's
// (spiller.mu: spillNext pushes under an entity's mu), the seal book's
// (sealBook.mu), trace waits', lifeMu (the
// core's start/stop state), the removals in progress (leaving.mu), the
// dead-letter backlog's (deadBacklog.mu), the notice backlog's
// (noticeBacklog.mu), the drain release's (drainRelease.mu) and the
// recent peers' (recentPeers.mu). No two
// entities' locks are ever held at once.
//
// The order is checked in -race builds: each of those locks is a regMutex,
// pubMutex, entMutex or leafMutex (lockorder.go), which is a plain
// sync.Mutex in an ordinary build and, with -race (lockorder_race.go),
// records the levels each goroutine holds and panics on an inversion
// before it can deadlock. The store's lock and history's file lock
// (history.Log: held only around file I/O, never while it calls back for
// names) are in their own packages and are not checked; neither are the
// audit log's (bridge/audit, outside the core: the gateway opens it) and the locks private to one call (Handover's, a spawn's
// phases, ackAll's).
package bridge
