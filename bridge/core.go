// Package bridge is the transport-agnostic bridge core of a gateway: the
// entity registry, per-entity inboxes with their waiters and held messages,
// the ack models of SPEC §4, and the envelope of SPEC §3. It owns the
// Transport interface that the embedded store and the AMQP broker implement.
// It knows nothing of MCP, HTTP or herdr: those call into Core.
package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Config is what a Core needs. Zero durations take the defaults below.
type Config struct {
	Host      string
	Transport Transport
	Store     *Store
	Logger    *slog.Logger
	Now       func() time.Time

	MaxWait         time.Duration // cap of any blocking call (default 45s)
	ProgressEvery   time.Duration // progress notification period while waiting (default 10s)
	ReceiptWait     time.Duration // how long an ANSWER waits for its receipt (default 10s)
	AskTTL          time.Duration // default lifetime of an ASK (default 10m)
	MessageTTL      time.Duration // expiresAt of SEND/REPLY/BROADCAST (default 24h)
	MaxMessageBytes int           // largest message a tool accepts (default 256 KiB)
	Prefetch        int           // per-inbox prefetch bound (default 1024)
	InboxMaxLength  int           // per-inbox cap (default 10000)
	InboxTTL        time.Duration // transport backstop TTL (default 7 days)
	InboxExpires    time.Duration // a broker deletes an inbox nobody consumed this long: a crashed gateway's orphans (default 7 days)
	SweepEvery      time.Duration // expiry sweeper period (default 1s)
	SeenSize        int           // msgId seen-set bound (default 65536)
	NudgeEvery      time.Duration // minimum gap between nudges of one entity (default 2s)
	ReattachGrace   time.Duration // how long a detached entity keeps its open turns (default 30s)
	InjectWait      time.Duration // bound of the forward path, brief to INJECTED (default 30s)
	PresenceEvery   time.Duration // heartbeat period across hosts (default 5s)
	PresenceTTL     time.Duration // a remote entry without a heartbeat this long is gone (default 3 heartbeats)
	Nudger          Nudger
	Injector        Injector // nil: every entity pulls

	// Trust (SPEC §3, §8). With a Verifier, every delivery must carry a
	// signature valid under its host's trusted key and a from that lives on
	// that host; with a Signer, everything published is signed. Both nil on
	// one host (embedded transport: nothing crosses a broker).
	Signer       Signer
	Verifier     Verifier
	ClockSkew    time.Duration // allowance on ts/expiresAt between hosts' clocks (default 2m)
	PresenceWait time.Duration // how long a message from a sender without presence waits for it (default PresenceTTL)
	Audit        *AuditLog     // metadata of every message published and received; nil: none
	// KeyFingerprint is the host key's (SHA256:…), advertised in the
	// _gateway presence entry.
	KeyFingerprint string
}

func (c *Config) defaults() {
	d := func(p *time.Duration, v time.Duration) {
		if *p <= 0 {
			*p = v
		}
	}
	d(&c.MaxWait, 45*time.Second)
	d(&c.ProgressEvery, 10*time.Second)
	d(&c.ReceiptWait, 10*time.Second)
	d(&c.AskTTL, 10*time.Minute)
	d(&c.MessageTTL, 24*time.Hour)
	d(&c.InboxTTL, 7*24*time.Hour)
	d(&c.InboxExpires, 7*24*time.Hour)
	d(&c.SweepEvery, time.Second)
	d(&c.NudgeEvery, 2*time.Second)
	d(&c.ReattachGrace, 30*time.Second)
	d(&c.InjectWait, 30*time.Second)
	d(&c.PresenceEvery, 5*time.Second)
	d(&c.PresenceTTL, 3*c.PresenceEvery)
	d(&c.ClockSkew, 2*time.Minute)
	d(&c.PresenceWait, c.PresenceTTL)
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = 256 << 10
	}
	if c.Prefetch <= 0 {
		c.Prefetch = 1024
	}
	if c.InboxMaxLength <= 0 {
		c.InboxMaxLength = 10000
	}
	if c.SeenSize <= 0 {
		c.SeenSize = 65536
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Host == "" {
		c.Host = "local"
	}
}

// Nudger is told when messages are held for an entity that has no open
// waiter. It is called from one goroutine, at most once per NudgeEvery per
// entity, and must not block.
type Nudger interface {
	Nudge(e Entity, held HeldSummary)
}

// HeldSummary says what is held for an entity.
type HeldSummary struct {
	Total int         `json:"total"`
	From  []FromCount `json:"from,omitempty"`
}

// FromCount is how many held messages came from one sender.
type FromCount struct {
	From     string `json:"from"`
	FromName string `json:"fromName"`
	Count    int    `json:"count"`
}

// Log keys.
const (
	LogMsgID   = "msgId"
	LogTraceID = "traceId"
	LogKind    = "kind"
	LogFrom    = "from"
	LogTo      = "to"
	LogGID     = "gid"
	LogReason  = "reason"
)

// Core is the bridge core of one gateway.
type Core struct {
	cfg Config
	log *slog.Logger
	tr  Transport
	st  *Store

	regMu sync.Mutex // serializes Register/Remove (they do transport I/O)

	mu            sync.Mutex
	ents          map[string]*entState
	byName        map[string]string
	tokens        map[string]string // token hash -> gid
	seen          *seenSet
	nudges        map[string]bool
	awaits        map[string]awaitRecord  // forward-path briefs awaiting their receipt, by msgId
	remote        map[string]*remoteEntry // entities of other hosts, by gid (presence)
	hosts         map[string]*remoteEntry // other hosts' _gateway entries
	profiles      func() []string
	presenceKick  chan struct{}
	pending       map[string][]pendingMsg // deliveries waiting for their sender's presence, by from
	pendingN      map[string]int          // how many wait, by queue
	pendingIDs    map[string]bool         // msgIds waiting
	lastBeat      map[string]time.Time    // ts of the newest heartbeat per gid: an older one is a replay
	bindings      map[string]*binding     // sender gid -> its host, from signed presence (remembered, see memory.go)
	dirtySeen     []seenRec
	dirtySenders  []senderRec
	memoryPruned  time.Time
	refused       refusals
	presenceSub   Subscription
	presenceHeard time.Time // when our own heartbeat last came back
	startedAt     time.Time
	spawnHandler  SpawnHandler
	controlSub    Subscription

	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	dlqSub  Subscription
	started bool
	closed  bool
}

// New builds a Core; Start starts it.
func New(cfg Config) (*Core, error) {
	cfg.defaults()
	if cfg.Transport == nil || cfg.Store == nil {
		return nil, errors.New("bridge: config needs a Transport and a Store")
	}
	if !ValidHost(cfg.Host) {
		return nil, fmt.Errorf("bridge: host id %q is not valid (letters, digits, '.', '_', '-'; at most 63)", cfg.Host)
	}
	return &Core{
		cfg: cfg, log: cfg.Logger, tr: cfg.Transport, st: cfg.Store,
		ents: map[string]*entState{}, byName: map[string]string{}, tokens: map[string]string{},
		seen: newSeenSet(cfg.SeenSize), nudges: map[string]bool{}, awaits: map[string]awaitRecord{},
		remote: map[string]*remoteEntry{}, hosts: map[string]*remoteEntry{}, presenceKick: make(chan struct{}, 1), pending: map[string][]pendingMsg{}, pendingN: map[string]int{}, pendingIDs: map[string]bool{}, lastBeat: map[string]time.Time{}, bindings: map[string]*binding{},
	}, nil
}

// PaneStatus records the live herdr status of the entity in pane (shown by
// the roster).
func (c *Core) PaneStatus(pane, status string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.ents {
		if st.PaneID == pane {
			st.paneStatus = status
		}
	}
}

// Panes lists the herdr panes of local entities.
func (c *Core) Panes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, st := range c.ents {
		if st.PaneID != "" {
			out = append(out, st.PaneID)
		}
	}
	return out
}

// PaneClosed removes the entities that lived in a closed pane: what was
// pending on them becomes ABANDONED for their counterparts, and their
// inboxes go.
func (c *Core) PaneClosed(ctx context.Context, pane string) {
	c.mu.Lock()
	var gids []string
	for gid, st := range c.ents {
		if st.PaneID == pane {
			gids = append(gids, gid)
		}
	}
	c.mu.Unlock()
	for _, gid := range gids {
		if err := c.Remove(ctx, gid); err != nil {
			c.log.Warn("removing the entity of a closed pane failed", LogGID, gid, "pane", pane, "err", err)
			continue
		}
		c.log.Info("pane closed: entity removed", LogGID, gid, "pane", pane)
	}
}

// Held reports what is held for gid and whether it has an open waiter.
func (c *Core) Held(gid string) (HeldSummary, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.ents[gid]
	if st == nil {
		return HeldSummary{}, false
	}
	return c.summaryLocked(st), len(st.waiters) > 0
}

// SetNudger sets who is told about held messages (the MCP server, and in a
// herdr pane the pane nudger). Safe to call while running.
func (c *Core) SetNudger(n Nudger) {
	c.mu.Lock()
	c.cfg.Nudger = n
	c.mu.Unlock()
}

// Host is this gateway's host id.
func (c *Core) Host() string { return c.cfg.Host }

// Config returns the effective configuration.
func (c *Core) Config() Config { return c.cfg }

// Start loads the registry, attaches a consumer to every local inbox and the
// dead-letter queue, and starts the sweeper and the nudge loop. They run
// until Close.
func (c *Core) Start(ctx context.Context) error {
	c.mu.Lock()
	if c.started {
		c.mu.Unlock()
		return errors.New("bridge: core already started")
	}
	c.started = true
	c.startedAt = c.cfg.Now()
	c.ctx, c.cancel = context.WithCancel(context.WithoutCancel(ctx))
	c.mu.Unlock()

	stored, err := c.st.loadEntities()
	if err != nil {
		return fmt.Errorf("bridge: load registry: %w", err)
	}
	if err := c.loadMemory(); err != nil {
		return fmt.Errorf("bridge: load the seen-set and sender bindings: %w", err)
	}
	// briefs awaiting receipts first: a receipt delivered as soon as the
	// inboxes attach must find its record, or it would be reported again
	awaits, err := c.st.loadAwaits()
	if err != nil {
		return fmt.Errorf("bridge: load briefs awaiting receipts: %w", err)
	}
	c.mu.Lock()
	for _, a := range awaits {
		c.awaits[a.MsgID] = a
	}
	c.mu.Unlock()
	for _, se := range stored {
		st := newEntState(se.Entity)
		st.tokens = se.Tokens
		c.mu.Lock()
		c.ents[se.GID] = st
		c.byName[se.Name] = se.GID
		for _, h := range se.Tokens {
			c.tokens[h] = se.GID
		}
		c.mu.Unlock()
		if err := c.attachInbox(st); err != nil {
			return err
		}
	}
	sub, err := c.tr.ConsumeDeadLetters(c.ctx, c.onDeadLetter)
	if err != nil {
		return fmt.Errorf("bridge: consume dead letters: %w", err)
	}
	c.dlqSub = sub
	if err := c.typedBeforeCrash(); err != nil {
		return fmt.Errorf("bridge: report briefs typed before a crash: %w", err)
	}
	if ct, ok := c.tr.(ControlTransport); ok {
		csub, err := ct.ConsumeControl(c.ctx, c.cfg.Host, c.onControl)
		if err != nil {
			return err
		}
		c.controlSub = csub
	}
	if pt, ok := c.tr.(PresenceTransport); ok {
		psub, err := pt.ConsumePresence(c.ctx, c.cfg.Host, c.onPresence)
		if err != nil {
			return err
		}
		c.presenceSub = psub
		c.wg.Add(1)
		go c.presenceLoop(pt)
	}
	c.wg.Add(2)
	go c.sweepLoop()
	go c.nudgeLoop()
	c.log.Info("bridge core started", "host", c.cfg.Host, "entities", len(stored))
	return nil
}

// Close stops consumers and loops. Held messages stay unacked in the
// transport, to be delivered again on the next start. Idempotent.
func (c *Core) Close() error {
	c.mu.Lock()
	if c.closed || !c.started {
		c.closed = true
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.cancel()
	var subs []Subscription
	for _, st := range c.ents {
		if st.sub != nil {
			subs = append(subs, st.sub)
			st.sub = nil
		}
		for _, w := range st.waiters {
			w.gone = true
		}
	}
	c.mu.Unlock()
	for _, s := range subs {
		s.Cancel()
	}
	if c.dlqSub != nil {
		c.dlqSub.Cancel()
	}
	if c.presenceSub != nil {
		c.presenceSub.Cancel()
	}
	if c.controlSub != nil {
		c.controlSub.Cancel()
	}
	c.wg.Wait()
	c.saveMemory(c.cfg.Now())
	return nil
}

func (c *Core) inboxSpec(e Entity) InboxSpec {
	return InboxSpec{Groups: e.Groups, MaxLength: c.cfg.InboxMaxLength, MessageTTL: c.cfg.InboxTTL, Expires: c.cfg.InboxExpires}
}

func (c *Core) attachInbox(st *entState) error {
	c.mu.Lock()
	e := st.Entity
	has := st.sub != nil
	c.mu.Unlock()
	if err := c.tr.DeclareInbox(c.ctx, e.GID, c.inboxSpec(e)); err != nil {
		return fmt.Errorf("bridge: declare inbox of %s: %w", e.Addr(), err)
	}
	if has {
		return nil
	}
	gid := e.GID
	sub, err := c.tr.Consume(c.ctx, gid, c.cfg.Prefetch, func(d Delivery) { c.deliver(gid, d) })
	if err != nil {
		return fmt.Errorf("bridge: consume inbox of %s: %w", e.Addr(), err)
	}
	c.mu.Lock()
	st.sub = sub
	c.mu.Unlock()
	return nil
}

// RegisterRequest registers or re-attaches an entity.
type RegisterRequest struct {
	Name   string
	Role   Role
	Groups []string
	PaneID string
	// NoToken re-attaches without minting a bearer token: the stdio relay
	// authenticates by its socket, and minting one per reconnect would push
	// the tokens users configured out of the last-32 window.
	NoToken bool
	// GID fixes the gid of a new entity (a spawned worker's gid is its
	// spawnId). Ignored on re-attach; an existing name with another gid is
	// an error.
	GID string
}

const maxTokensPerEntity = 32

// Register creates the entity (host, name) or re-attaches to it — same gid,
// same inbox, nothing held is lost — and issues a new bearer token.
func (c *Core) Register(ctx context.Context, req RegisterRequest) (Entity, string, error) {
	if !ValidName(req.Name) {
		return Entity{}, "", &UserError{Msg: fmt.Sprintf("name %q is not valid: use letters, digits, '.', '_' or '-' (at most 64, no '@')", req.Name)}
	}
	if !req.Role.Valid() {
		return Entity{}, "", &UserError{Msg: fmt.Sprintf("role %q is not valid: use primary, worker or orchestrator", req.Role)}
	}
	groups, err := normGroups(req.Groups)
	if err != nil {
		return Entity{}, "", err
	}
	c.regMu.Lock()
	defer c.regMu.Unlock()
	token, hash := NewToken()
	c.mu.Lock()
	if c.closed || !c.started {
		c.mu.Unlock()
		return Entity{}, "", errors.New("bridge: core is not running")
	}
	var st *entState
	if gid, ok := c.byName[req.Name]; ok {
		if req.GID != "" && req.GID != gid {
			c.mu.Unlock()
			return Entity{}, "", userErr("name %q is taken on this host by another entity", req.Name)
		}
		st = c.ents[gid]
		st.Role = req.Role
		st.Groups = groups
		if req.PaneID != "" {
			st.PaneID = req.PaneID
		}
	} else {
		gid := req.GID
		if gid == "" {
			gid = uuid.NewString()
		}
		if c.ents[gid] != nil {
			c.mu.Unlock()
			return Entity{}, "", userErr("gid %s is taken by %s", gid, c.ents[gid].Name)
		}
		st = newEntState(Entity{GID: gid, Name: req.Name, Host: c.cfg.Host, Role: req.Role, Groups: groups, PaneID: req.PaneID, Registered: c.cfg.Now().UTC()})
	}
	if req.NoToken {
		token, hash = "", ""
	} else {
		st.tokens = append(st.tokens, hash)
	}
	if len(st.tokens) > maxTokensPerEntity {
		st.tokens = st.tokens[len(st.tokens)-maxTokensPerEntity:]
	}
	se := storedEntity{Entity: st.Entity, Tokens: append([]string(nil), st.tokens...)}
	se.Groups = append([]string(nil), st.Groups...)
	c.mu.Unlock()
	if err := c.st.putEntity(se); err != nil {
		return Entity{}, "", fmt.Errorf("bridge: persist entity %s: %w", req.Name, err)
	}
	c.mu.Lock()
	c.ents[st.GID] = st
	c.byName[st.Name] = st.GID
	for _, h := range st.tokens {
		c.tokens[h] = st.GID
	}
	e := st.snapshot()
	c.mu.Unlock()
	if err := c.attachInbox(st); err != nil {
		return Entity{}, "", err
	}
	c.kickPresence()
	c.log.Info("entity registered", LogGID, e.GID, "name", e.Name, "role", e.Role, "groups", e.Groups)
	return e, token, nil
}

// Remove deletes an entity and its inbox. What was pending on it becomes
// ABANDONED for its counterparts.
func (c *Core) Remove(ctx context.Context, gid string) error {
	c.regMu.Lock()
	defer c.regMu.Unlock()
	c.mu.Lock()
	st := c.ents[gid]
	if st == nil {
		c.mu.Unlock()
		return &UserError{Msg: fmt.Sprintf("no entity %s", gid)}
	}
	out := c.abandonLocked(st)
	if b := st.brief; b.from != "" { // the brief it was working on will get no reply
		out = append(out, c.control(KindAbandoned, gid, b.from, b.msgID, "", b.traceID, st.Name+" went away (removed or its pane closed) before replying"))
	}
	delete(c.ents, gid)
	delete(c.byName, st.Name)
	for _, h := range st.tokens {
		delete(c.tokens, h)
	}
	for _, w := range st.waiters {
		w.gone = true // open calls run out on their own timers
	}
	st.waiters = nil
	sub := st.sub
	st.sub = nil
	c.mu.Unlock()
	c.send(out)
	if sub != nil {
		sub.Cancel()
	}
	if err := c.tr.DeleteInbox(ctx, gid); err != nil {
		return fmt.Errorf("bridge: delete inbox of %s: %w", st.Name, err)
	}
	c.publishPresence([]Presence{{GID: gid, Name: st.Name, Host: c.cfg.Host, Gone: true}})
	return c.st.deleteEntity(gid)
}

// Authenticate maps a bearer token to its entity: the index finds the
// entity by the token's hash, and the hash must then match one of the
// entity's own token hashes in a constant-time comparison (token.go says
// why that is enough).
func (c *Core) Authenticate(token string) (Entity, bool) {
	h := HashToken(token)
	c.mu.Lock()
	defer c.mu.Unlock()
	gid, ok := c.tokens[h]
	if !ok {
		return Entity{}, false
	}
	st := c.ents[gid]
	if st == nil || !st.hasTokenHash(h) {
		return Entity{}, false
	}
	return st.snapshot(), true
}

// Entity returns the local entity gid.
func (c *Core) Entity(gid string) (Entity, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.ents[gid]
	if st == nil {
		return Entity{}, false
	}
	return st.snapshot(), true
}

// Attach records that one more MCP session of gid is open.
func (c *Core) Attach(gid string) {
	c.mu.Lock()
	if st := c.ents[gid]; st != nil {
		st.sessions++
		st.detachedAt = time.Time{}
	}
	c.mu.Unlock()
}

// Detach records that one MCP session of gid closed. When the last one
// closes and none re-attaches within ReattachGrace, what was pending on the
// entity becomes ABANDONED for its counterparts.
func (c *Core) Detach(gid string) {
	c.mu.Lock()
	if st := c.ents[gid]; st != nil && st.sessions > 0 {
		st.sessions--
		if st.sessions == 0 {
			st.detachedAt = c.cfg.Now()
		}
	}
	c.mu.Unlock()
}

func normGroups(in []string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, g := range in {
		if !ValidGroup(g) {
			return nil, &UserError{Msg: fmt.Sprintf("group %q is not valid: lowercase letters, digits, '_' or '-', at most 63, not \"all\"", g)}
		}
		if !seen[g] {
			seen[g] = true
			out = append(out, g)
		}
	}
	return out, nil
}

// newEnv fills the common envelope fields.
func (c *Core) newEnv(kind Kind, from, to string, body []byte, ttl time.Duration) *Envelope {
	now := c.cfg.Now()
	return &Envelope{
		V: Version, Kind: kind, MsgID: uuid.NewString(), From: from, To: to, Host: c.cfg.Host,
		TS: now, ExpiresAt: now.Add(ttl), Body: body,
	}
}

// publish signs env, publishes it and audits the outcome.
func (c *Core) publish(ctx context.Context, key string, env *Envelope, mandatory bool) error {
	c.sign(env)
	err := c.tr.Publish(ctx, key, env, mandatory)
	if err != nil {
		c.auditEnv("out", env, key, "publish failed: "+err.Error())
	} else {
		c.auditEnv("out", env, key, "published")
	}
	return err
}

// outMsg is a publish decided under the lock and done after it.
type outMsg struct {
	env       *Envelope
	key       string
	mandatory bool
}

// send publishes control messages decided under the lock. Failures are
// logged: the counterpart is gone or the transport is down, and the caller
// (a delivery handler) cannot do better.
func (c *Core) send(out []outMsg) (failed []string) {
	for _, o := range out {
		key := o.key
		if key == "" {
			key = o.env.To
		}
		// not tied to c.ctx: a receipt decided while the core shuts down
		// still goes out (the transport closes after the core)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := c.publish(ctx, key, o.env, o.mandatory)
		cancel()
		if err != nil {
			c.log.Warn("control message not delivered", LogKind, o.env.Kind, LogMsgID, o.env.MsgID, "corr", o.env.Corr, LogTo, o.env.To, "err", err)
			failed = append(failed, o.env.MsgID)
		}
	}
	return failed
}

// control builds a control message from entity from to entity to.
func (c *Core) control(kind Kind, from, to, corr, turnID, traceID, reason string) outMsg {
	e := c.newEnv(kind, from, to, []byte(reason), c.cfg.MessageTTL)
	e.Corr, e.TurnID, e.TraceID = corr, turnID, traceID
	return outMsg{env: e}
}
