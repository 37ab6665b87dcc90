package bridge

import (
	"log/slog"
	"time"

	"github.com/herdbridge/herdbridge/bridge/audit"
	"github.com/herdbridge/herdbridge/bridge/store"
)

// Config is everything a Core is wired with, given once to New: the one
// door. Zero durations take the defaults below. Nothing in it changes
// after New, so it is read without a lock.
type Config struct {
	Host      string
	Transport Transport
	Store     *store.Store
	Logger    *slog.Logger
	Now       func() time.Time

	MaxWait         time.Duration // cap of any blocking call (default 45s)
	ProgressEvery   time.Duration // progress notification period while waiting (default 10s)
	ReceiptWait     time.Duration // how long an ANSWER waits for its receipt (default 10s)
	AskTTL          time.Duration // default lifetime of an ASK (default 10m)
	MessageTTL      time.Duration // expiresAt of SEND/REPLY/BROADCAST (default 24h)
	MaxMessageBytes int           // largest message a tool accepts (default 256 KiB)
	ResultMaxBytes  int           // message bodies one result carries, as JSON (default DefaultResultMaxBytes, 2 MiB): the rest stays held (budget.go)
	SpillDelay      time.Duration // how long a held message no call waits for stays in memory before it is written to the store (default 1s): one drained sooner is never written
	Prefetch        int           // per-inbox prefetch bound (default 128): deliveries in flight before they are held, so it bounds memory by count × message size
	InboxMaxLength  int           // per-inbox cap (default 10000)
	InboxTTL        time.Duration // transport backstop TTL (default 7 days)
	InboxExpires    time.Duration // a broker deletes an inbox nobody consumed this long: a crashed gateway's orphans (default 7 days)
	SweepEvery      time.Duration // expiry sweeper period (default 1s)
	SeenSize        int           // msgId seen-set bound (default 65536)
	NoticeDelay     time.Duration // first broker-held retry of a notice the transport refused, where the broker has bridge.delay (default 1m; noticedelay.go)
	// The request book keeps in memory at most this many published calls
	// with a request_id, in all and per entity (defaults
	// DefaultRequestsInMemory, DefaultRequestsPerEntityInMemory); the
	// store keeps them all for RequestMemory.
	RequestsInMemory, RequestsPerEntityInMemory int
	NudgeEvery                                  time.Duration // minimum gap between nudges of one entity (default 2s)
	ReattachGrace                               time.Duration // how long a detached entity keeps its open turns (default 30s)
	InjectWait                                  time.Duration // bound of typing one brief into a ready pane, to its INJECTED (default 30s)
	PaneRecheck                                 time.Duration // how often a pane with queued briefs is looked at without a status event (default 2s)
	PresenceEvery                               time.Duration // heartbeat period across hosts (default 5s)
	PresenceTTL                                 time.Duration // a remote entry without a heartbeat this long is gone (default 3 heartbeats)
	// PresencePerEntity forces the presence of gateways before issue 25:
	// a heartbeat per entity every period, no digest, no deltas, no
	// snapshots (presencesync.go). For measurements and the upgrade tests:
	// such a gateway is what an old one looks like to the others.
	PresencePerEntity bool
	// PresenceJoinGap is, by host, the least time between two heartbeats
	// that other hosts' starts ask for (default a tenth of PresenceEvery,
	// at most 250ms). Each such heartbeat reaches every host: while hosts
	// keep starting, the fabric carries up to PresenceEvery/gap times its
	// idle presence traffic. The in-process scale simulation, starting a
	// thousand gateways one by one, sets it to the period.
	PresenceJoinGap time.Duration
	StaleAfter      time.Duration // an entity outside a pane idle this long shows as stale in the roster (default 24h; negative: never)
	ReapAfter       time.Duration // … and idle this long is removed, what it held dead-lettered and reported (default 7 days; negative: never)

	// Nudger is told about messages held with no waiter (the MCP server,
	// and in herdr the pane nudger: Nudgers tells several). nil: nobody.
	Nudger Nudger
	// Injector types briefs into workers' panes (the forward path). nil:
	// every entity pulls.
	Injector Injector
	// Panes starts spawned workers in new panes. nil: this host cannot
	// spawn (it can still ask other hosts to).
	Panes PaneStarter
	// Spawn bounds spawning here: how many workers, and what a caller may
	// choose per profile (spawnpolicy.go).
	Spawn SpawnLimits
	// History keeps entities' transcripts (history.go); Dir empty: none.
	History HistoryConfig
	// RolePolicy says who may brief whom (rolepolicy.go).
	RolePolicy RolePolicy

	// Trust (SPEC §3, §8). With a Verifier, every delivery must carry a
	// signature valid under its host's trusted key and a from that lives on
	// that host; with a Signer, everything published is signed. Both nil on
	// one host (embedded transport: nothing crosses a broker).
	Signer   Signer
	Verifier Verifier
	// Sealer is this host's HPKE keys, ParseSealPublic decodes a peer's
	// published one, and Seal is auto | require | off (seal.go; "" is
	// auto). Sealer nil: nothing is sealed, and a sealed message is
	// refused as unsealable.
	Sealer          Sealer
	ParseSealPublic ParseSealPublic
	Seal            string
	ClockSkew       time.Duration // allowance on ts/expiresAt between hosts' clocks (default 2m)
	PresenceWait    time.Duration // how long a message from a sender without presence waits for it (default PresenceTTL)
	Audit           *audit.Log    // metadata of every hop of every message (observe.go); nil: none
	// Observer is told every hop of every message (observe.go): metrics,
	// the operator page's feed. nil: nobody.
	Observer Observer
	// KeyFingerprint is the host key's (SHA256:…), advertised in the
	// _gateway presence entry.
	KeyFingerprint string
	// Trusted lists the hosts this gateway trusts, host → the fingerprints
	// of its keys (the trust file, read live). Its _gateway heartbeat
	// publishes it, so every peer can tell whether this host trusts it.
	// nil: nothing is published (peers show "unknown").
	Trusted func() map[string][]string

	// DeliveryLease bounds how long messages a call handed over wait for
	// evidence their client has them (handover.go) before they are held
	// again, flagged redelivered (default DefaultDeliveryLease).
	DeliveryLease time.Duration
	// RemovalDrainBound bounds how long a removal's caller waits for the
	// closed inbox to be emptied; past it the drain goes on in the
	// background (default DefaultRemovalDrainBound).
	RemovalDrainBound time.Duration
}

func (c *Config) defaults() {
	d := func(p *time.Duration, v time.Duration) {
		if *p <= 0 {
			*p = v
		}
	}
	d(&c.MaxWait, DefaultMaxWait)
	d(&c.ProgressEvery, 10*time.Second)
	d(&c.ReceiptWait, 10*time.Second)
	d(&c.DeliveryLease, DefaultDeliveryLease)
	d(&c.RemovalDrainBound, DefaultRemovalDrainBound)
	d(&c.AskTTL, 10*time.Minute)
	d(&c.MessageTTL, 24*time.Hour)
	d(&c.InboxTTL, 7*24*time.Hour)
	d(&c.InboxExpires, 7*24*time.Hour)
	d(&c.SweepEvery, time.Second)
	d(&c.SpillDelay, time.Second)
	d(&c.NudgeEvery, 2*time.Second)
	d(&c.ReattachGrace, 30*time.Second)
	d(&c.InjectWait, 30*time.Second)
	d(&c.PaneRecheck, 2*time.Second)
	d(&c.PresenceEvery, 5*time.Second)
	d(&c.PresenceTTL, 3*c.PresenceEvery)
	d(&c.ClockSkew, 2*time.Minute)
	d(&c.PresenceWait, c.PresenceTTL)
	d(&c.PresenceJoinGap, min(c.PresenceEvery/10, 250*time.Millisecond))
	if c.StaleAfter == 0 {
		c.StaleAfter = 24 * time.Hour
	}
	if c.ReapAfter == 0 {
		c.ReapAfter = 7 * 24 * time.Hour
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = 256 << 10
	}
	if c.ResultMaxBytes <= 0 {
		c.ResultMaxBytes = DefaultResultMaxBytes
	}
	if c.Prefetch <= 0 {
		c.Prefetch = 128
	}
	if c.InboxMaxLength <= 0 {
		c.InboxMaxLength = 10000
	}
	if c.SeenSize <= 0 {
		c.SeenSize = 65536
	}
	d(&c.NoticeDelay, time.Minute)
	c.History.defaults()
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
