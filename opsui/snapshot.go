package opsui

import (
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker"
)

// Source is what the page reads of the core (bridge.Core has all three).
// It is called on HTTP goroutines, never from the observer.
type Source interface {
	Roster() bridge.RosterView
	DeadLetters(limit int) ([]bridge.DeadLetterRecord, error)
	Refused() map[string]uint64
}

// Peer is what the page shows of another host's trust and clock. Every
// field is optional: the page renders "—" for what is unknown.
type Peer struct {
	WeTrust  *bool  `json:"weTrust,omitempty"`  // this host's trust file has a key of it
	TrustsUs string `json:"trustsUs,omitempty"` // yes | no | unknown: its published trust names this host
	Trust    string `json:"trust,omitempty"`    // both | one-way | untrusted | unknown
	Why      string `json:"why,omitempty"`      // what is wrong with the trust, and the fix
	SkewMs   *int64 `json:"skewMs,omitempty"`   // its clock minus this one (positive: ahead)
	// LastHeartbeat overrides the roster's when set.
	LastHeartbeat *time.Time `json:"lastHeartbeat,omitempty"`
}

// HostRow is one line of the hosts table.
type HostRow struct {
	Host          string     `json:"host"`
	Local         bool       `json:"local"`
	Key           string     `json:"key,omitempty"`
	Profiles      []string   `json:"profiles"`
	LastHeartbeat *time.Time `json:"lastHeartbeat,omitempty"`
	Peer
}

// EntityRow is one line of the entities table: the roster's view of the
// entity, as bridge_roster gives it.
type EntityRow = bridge.EntityView

// DeadRow is one dead letter, with names.
type DeadRow struct {
	bridge.DeadLetterRecord
	FromName string `json:"fromName,omitempty"`
	ToName   string `json:"toName,omitempty"`
}

// Snapshot is /ui/api/snapshot: the tables, in one JSON object.
type Snapshot struct {
	Host        string            `json:"host"`
	Boot        string            `json:"boot"` // changes when the gateway restarts
	At          time.Time         `json:"at"`
	Hosts       []HostRow         `json:"hosts"`
	Entities    []EntityRow       `json:"entities"`
	DeadLetters []DeadRow         `json:"deadLetters"`
	DeadError   string            `json:"deadError,omitempty"`
	Refused     map[string]uint64 `json:"refused"`
	Refusals    []Item            `json:"refusals"` // the latest, newest first
	Streams     int               `json:"streams"`  // open live feeds on this gateway
	Broker      *broker.Link      `json:"broker,omitempty"`
}

// deadShown is how many dead letters the page lists.
const deadShown = 50

func (h *handler) snapshot() Snapshot {
	v := h.cfg.Source.Roster()
	h.names.Learn(v)
	s := Snapshot{Host: h.cfg.Host, Boot: h.cfg.Boot, At: h.now().UTC(), Hosts: []HostRow{}, Entities: []EntityRow{},
		DeadLetters: []DeadRow{}, Refused: h.cfg.Source.Refused(), Refusals: h.cfg.Feed.Refusals(), Streams: h.cfg.Feed.Streams()}
	if h.cfg.Broker != nil {
		s.Broker = h.cfg.Broker()
	}
	var peers map[string]Peer
	if h.cfg.Peers != nil {
		peers = h.cfg.Peers()
	}
	for _, hv := range v.Hosts {
		row := HostRow{Host: hv.Host, Local: hv.Local, Key: hv.Key, Profiles: hv.Profiles, LastHeartbeat: hv.LastHeartbeat, Peer: peers[hv.Host]}
		if row.Peer.LastHeartbeat != nil {
			row.LastHeartbeat = row.Peer.LastHeartbeat
		}
		s.Hosts = append(s.Hosts, row)
	}
	s.Entities = append(s.Entities, v.Entities...)
	dead, err := h.cfg.Source.DeadLetters(deadShown)
	if err != nil {
		s.DeadError = err.Error()
	}
	for i := len(dead) - 1; i >= 0; i-- { // newest first
		d := dead[i]
		s.DeadLetters = append(s.DeadLetters, DeadRow{DeadLetterRecord: d, FromName: h.names.Name(d.From), ToName: h.names.Name(d.To)})
	}
	for i := range s.Refusals {
		h.name(&s.Refusals[i])
	}
	if s.Refused == nil {
		s.Refused = map[string]uint64{}
	}
	return s
}

// name fills it's names.
func (h *handler) name(it *Item) {
	it.FromName, it.ToName = h.names.Name(it.From), h.names.Name(it.To)
}
