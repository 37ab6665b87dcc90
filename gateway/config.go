package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/herdbridge/herdbridge/herdr"
)

// FileConfig is the gateway's configuration file (JSON), by default
// config.json in the state directory. Every field is optional.
type FileConfig struct {
	// Profiles are the workers bridge_spawn can start on this host.
	Profiles map[string]herdr.Profile `json:"profiles,omitempty"`
	// MaxWorkers caps the spawned workers registered on this host at once
	// (0: no cap); each profile may have its own maxWorkers too. A spawn
	// past a cap is refused at once, naming the cap and the count.
	MaxWorkers int         `json:"maxWorkers,omitempty"`
	Herdr      HerdrConfig `json:"herdr"`
	// History is the opt-in per-entity transcript (HistoryConfig).
	History HistoryConfig `json:"history"`
	// RolePolicy says who may brief whom (RolePolicyConfig).
	RolePolicy RolePolicyConfig `json:"rolePolicy"`
	// InboxMaxLength caps each inbox (default 10000); past it sends are
	// refused with "inbox full" and the message is dead-lettered. On a
	// broker, changing it for an existing inbox is refused at startup
	// (PRECONDITION_FAILED names the queue).
	InboxMaxLength int `json:"inboxMaxLength,omitempty"`
	// ResultMaxBytes is the byte budget of one tool result's message
	// bodies, counted as JSON (default 2 MiB): a bridge_poll, peek or
	// bridge_history takes what fits and says how many more are held; a
	// single message bigger than it still comes, alone.
	ResultMaxBytes int `json:"resultMaxBytes,omitempty"`
	// ReceiptWait is how long a receipt (INJECTED, an answer's delivery)
	// may take to come back past its own bound (default 10s).
	ReceiptWait Duration `json:"receiptWait,omitempty"`
	// Net bounds connections and their timeouts (NetConfig).
	Net NetConfig `json:"net"`
	// Broker is the broker's amqp[s]:// URI (or a comma list of its nodes)
	// and Brokers a list of its nodes, both used when --broker and
	// $HERDBRIDGE_BROKER are unset; the nodes are tried in a shuffled
	// order, the connection moving to another when it is lost.
	Broker  string   `json:"broker,omitempty"`
	Brokers []string `json:"brokers,omitempty"`
	// BrokerOutage is what a message for another host does while the
	// broker is unreachable: "spool" (default) keeps it in this gateway's
	// outbox and publishes it when the broker returns, the send returning
	// queued; "fail" fails the send within brokerWait. --broker-outage
	// overrides it.
	BrokerOutage string `json:"brokerOutage,omitempty"`
	// Seal is whether bodies across hosts are sealed to the recipient
	// host's HPKE key: "auto" (default: sealed when its key is known,
	// else clear), "require" (never clear: refused instead) or "off".
	// --seal overrides it.
	Seal string `json:"seal,omitempty"`
	// BrokerWait bounds how long a publish waits for an unreachable broker
	// before it is spooled or fails (default 5s). --broker-wait overrides it.
	BrokerWait Duration `json:"brokerWait,omitempty"`
	// BrokerOverflow forces the x-overflow inboxes are declared with:
	// "reject-publish-dlx" or "reject-publish". Unset, it is chosen by the
	// broker's product at connect: reject-publish on LavinMQ (which treats
	// reject-publish-dlx as drop-head), reject-publish-dlx elsewhere.
	BrokerOverflow string `json:"brokerOverflow,omitempty"`
	// QueueType is the type of the broker's inboxes, control and
	// dead-letter queues: "auto" (default: quorum on a RabbitMQ cluster
	// of at least 3 configured nodes, classic otherwise), "classic" or
	// "quorum". --queue-type overrides it.
	QueueType string `json:"queueType,omitempty"`
	// OutboxMaxMessages and OutboxMaxBytes cap the outbox (defaults 100000
	// and 256 MiB): past either, a message for another host is refused
	// while the broker is down, saying so.
	OutboxMaxMessages int   `json:"outboxMaxMessages,omitempty"`
	OutboxMaxBytes    int64 `json:"outboxMaxBytes,omitempty"`
	// StaleAfter: an entity outside a herdr pane with no session and no
	// activity this long shows as stale in the roster (default 24h).
	// ReapAfter: idle this long it is removed with its inbox, what it held
	// dead-lettered and the senders told (default 168h, 7 days). A
	// negative value ("-1s") turns either off.
	StaleAfter Duration `json:"staleAfter,omitempty"`
	ReapAfter  Duration `json:"reapAfter,omitempty"`
	// DeliveryLease: how long messages handed to a call wait for evidence
	// that its client has them before they are held again, flagged
	// redelivered (default 5m; README "Semantics").
	DeliveryLease Duration `json:"deliveryLease,omitempty"`
	// Metrics tunes /metrics (MetricsConfig).
	Metrics MetricsConfig `json:"metrics"`
	// BrokerPassword is the password of the user the broker URL names,
	// kept out of argv (brokerpass.go); only in a config file of mode
	// 0600. --broker-password-file and $HERDBRIDGE_BROKER_PASSWORD_FILE
	// win over it.
	BrokerPassword string `json:"brokerPassword,omitempty"`
}

// HerdrConfig tunes the herdr side.
type HerdrConfig struct {
	// Disabled turns the herdr integration off: briefs to workers in panes
	// are then held for bridge_poll like any pull entity's.
	Disabled bool `json:"disabled,omitempty"`
	// Socket is herdr's API socket (default: found as herdr's CLI does).
	Socket string `json:"socket,omitempty"`
	// ReadyWait is accepted for older config files and ignored: a brief
	// for a worker that is not ready no longer fails after a bound, it
	// waits in the pane's queue until the worker is ready or it expires.
	ReadyWait Duration `json:"readyWait,omitempty"`
	// MaxInlineBrief is the largest brief typed inline (default 8192 bytes);
	// a larger one is written to a file the prompt names.
	MaxInlineBrief int `json:"maxInlineBrief,omitempty"`
	// PaneNudge types a one-line reminder into a primary's pane when
	// replies are held for it and it is idle (default on).
	PaneNudge *bool `json:"paneNudge,omitempty"`
	// NudgeBackoff is the first gap between two reminders (default 30s).
	NudgeBackoff Duration `json:"nudgeBackoff,omitempty"`
	// SpawnReadyWait bounds the wait for a spawned agent to be ready (default 60s).
	SpawnReadyWait Duration `json:"spawnReadyWait,omitempty"`
	// InjectWait bounds the forward path from taking a brief to its
	// INJECTED receipt (default 30s); past it plus receiptWait the sender
	// gets FAILED.
	InjectWait Duration `json:"injectWait,omitempty"`
}

// HistoryConfig sets the history kept of entities' messages, in
// <state dir>/history/<name>.jsonl (mode 0600).
type HistoryConfig struct {
	// All keeps every local entity's history (as --history does); without
	// it only entities registered with --history have one.
	All bool `json:"all,omitempty"`
	// MaxBytes caps one entity's history (default 16 MiB): past it the
	// oldest entries go.
	MaxBytes int64 `json:"maxBytes,omitempty"`
	// MaxAge: older entries are dropped (default 720h, 30 days).
	MaxAge Duration `json:"maxAge,omitempty"`
}

// RolePolicyConfig is "rolePolicy": by default primaries and
// orchestrators brief workers, and workers reply, ask and answer.
type RolePolicyConfig struct {
	// WorkersMayBrief lets this host's workers brief other workers
	// (bridge_send to a worker, bridge_spawn with a brief) and broadcast,
	// and lets other hosts' workers brief this host's workers.
	WorkersMayBrief bool `json:"workersMayBrief,omitempty"`
}

// Duration is a time.Duration written as "30s".
type Duration time.Duration

// UnmarshalJSON reads "30s" (or a number of seconds).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		*d = Duration(v)
		return nil
	}
	var n float64
	if err := json.Unmarshal(b, &n); err != nil {
		return errors.New(`a duration is "30s" or a number of seconds`)
	}
	*d = Duration(n * float64(time.Second))
	return nil
}

// MarshalJSON writes "30s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// LoadFile reads the configuration file at path; a missing file is the
// zero config unless required.
func LoadFile(path string, required bool) (FileConfig, error) {
	var c FileConfig
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && !required {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	if c.BrokerPassword != "" {
		if err := CheckPrivateFile(path, "config file"); err != nil {
			return c, fmt.Errorf("config %s holds brokerPassword: %w", path, err)
		}
	}
	if c.ResultMaxBytes < 0 {
		return c, fmt.Errorf("config %s: resultMaxBytes %d is negative: leave it out for the default (2 MiB)", path, c.ResultMaxBytes)
	}
	if c.MaxWorkers < 0 {
		return c, fmt.Errorf("config %s: maxWorkers %d is negative", path, c.MaxWorkers)
	}
	for name, p := range c.Profiles {
		if err := p.Validate(name); err != nil {
			return c, fmt.Errorf("config %s: %w", path, err)
		}
	}
	return c, nil
}

// DefaultStateDir is $HERDBRIDGE_STATE_DIR, else $XDG_STATE_HOME/herdbridge,
// else ~/.local/state/herdbridge.
func DefaultStateDir() string {
	if d := os.Getenv("HERDBRIDGE_STATE_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "herdbridge")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "herdbridge")
	}
	return filepath.Join(home, ".local", "state", "herdbridge")
}

// DefaultHost is the host id from the machine's host name, with what a
// host id may not hold replaced by '-'; "local" without one.
func DefaultHost() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "local"
	}
	h = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			return r
		}
		return '-'
	}, h)
	if len(h) > 63 {
		h = h[:63]
	}
	return h
}
