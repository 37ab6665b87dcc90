package gateway

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker"
	"github.com/herdbridge/herdbridge/herdr"
)

// DoctorReport is what a running gateway knows for `herdbridge doctor`
// (the admin socket's "doctor" op): what only the live process can see —
// herdr as it reaches it, the broker link, and the other hosts' trust and
// clocks from their heartbeats. Doctor checks the files itself.
type DoctorReport struct {
	Host      string `json:"host"`
	Key       string `json:"key,omitempty"` // this host key's fingerprint (across hosts)
	Transport string `json:"transport"`     // embedded | broker
	URL       string `json:"url"`
	// ClockSkewMs is the allowance on another host's clock (bridge
	// Config.ClockSkew): past it, its messages are refused.
	ClockSkewMs int64             `json:"clockSkewMs"`
	Peers       []bridge.PeerView `json:"peers"`
	Herdr       *HerdrReport      `json:"herdr,omitempty"`  // nil: herdr disabled
	Broker      *BrokerReport     `json:"broker,omitempty"` // nil: embedded transport
	// ArgvSecret names the argument of the gateway's own command line
	// that carries a password (redacted), "" if none (doctorargv.go).
	ArgvSecret string      `json:"argvSecret,omitempty"`
	Seal       *SealReport `json:"seal,omitempty"` // nil: nothing sealed (embedded transport)
}

// HerdrReport is herdr as the gateway reaches it.
type HerdrReport struct {
	Socket   string `json:"socket"`
	Version  string `json:"version,omitempty"`
	Protocol int    `json:"protocol,omitempty"`
	Error    string `json:"error,omitempty"` // the ping failed
	// NeededBy says why herdr must run ("" when nothing here needs it:
	// without herdr every worker pulls, so an absent herdr is a warning).
	NeededBy string `json:"neededBy,omitempty"`
	// Panes are the panes of the registered entities; Alive is false for
	// one herdr no longer lists (only when the ping worked).
	Panes []PaneCheck `json:"panes"`
}

// PaneCheck is one registered entity's pane.
type PaneCheck struct {
	Name  string `json:"name"`
	Role  string `json:"role"`
	Pane  string `json:"pane"`
	Alive bool   `json:"alive"`
}

// BrokerReport is the broker link.
type BrokerReport struct {
	Connected bool   `json:"connected"`
	Topology  string `json:"topology,omitempty"` // what is missing or refused; "" when present
	// HeardSelfMs is how long ago this gateway's own heartbeat came back
	// (nil: never): it proves the login may publish on the roster and read
	// its roster queue. HeartbeatMs is the heartbeat period.
	HeardSelfMs *int64 `json:"heardSelfMs,omitempty"`
	HeartbeatMs int64  `json:"heartbeatMs"`
	// Server is the broker's product and version as it announced them at
	// connect, and the x-overflow this gateway declares inboxes with.
	Server broker.ServerInfo `json:"server"`
	// Delay is whether bridge.delay (x-delayed-message) is in use.
	Delay bridge.DelayState `json:"delay"`
	// QueueType is the type of this gateway's broker queues and why.
	QueueType broker.QueueTypeChoice `json:"queueType"`
	// Link is the node connected to and the nodes configured.
	Link broker.Link `json:"link"`
}

// brokerLink is the broker node connected to; nil on the embedded
// transport.
func (g *Gateway) brokerLink() *broker.Link {
	if g.broker == nil {
		return nil
	}
	l := g.broker.Link()
	return &l
}

// DoctorReport gathers the report; each probe is bounded, so a hung herdr
// or broker makes a slow answer, not none.
func (g *Gateway) DoctorReport(ctx context.Context) *DoctorReport {
	cc := g.core.Config()
	r := &DoctorReport{Host: g.cfg.Host, Key: cc.KeyFingerprint, Transport: "embedded", URL: g.URL(), ArgvSecret: ArgvPassword(os.Args),
		ClockSkewMs: cc.ClockSkew.Milliseconds(), Peers: g.core.Peers()}
	if r.Peers == nil {
		r.Peers = []bridge.PeerView{}
	}
	if g.herdr != nil {
		r.Herdr = g.herdrReport(ctx)
	}
	if g.broker != nil {
		r.Transport = "broker"
		r.Broker = g.brokerReport(ctx, cc)
	}
	r.Seal = g.sealReport()
	return r
}

func (g *Gateway) herdrReport(ctx context.Context) *HerdrReport {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	r := &HerdrReport{Socket: g.cfg.File.Herdr.Socket, Panes: []PaneCheck{}}
	if r.Socket == "" {
		r.Socket, _ = herdr.SocketPath()
	}
	pong, err := g.herdr.Ping(ctx)
	var live []herdr.PaneInfo
	if err == nil {
		live, err = g.herdr.PaneList(ctx)
	}
	if err != nil {
		r.Error = herdrErrText(err)
	}
	r.Version, r.Protocol = pong.Version, pong.Protocol
	for _, e := range g.core.Roster().Entities {
		if e.Host != g.cfg.Host || e.PaneID == "" {
			continue
		}
		alive := err != nil || slices.ContainsFunc(live, func(p herdr.PaneInfo) bool { return p.PaneID == e.PaneID })
		r.Panes = append(r.Panes, PaneCheck{Name: e.Name, Role: string(e.Role), Pane: e.PaneID, Alive: alive})
	}
	r.NeededBy = herdrNeededBy(g.cfg.File, len(r.Panes))
	return r
}

// herdrNeededBy says what on this host needs herdr: a socket named in the
// configuration, spawn profiles, or entities registered in panes.
func herdrNeededBy(f FileConfig, panes int) string {
	switch {
	case f.Herdr.Socket != "":
		return "the configuration names its socket"
	case len(f.Profiles) > 0:
		return "bridge_spawn starts this host's profiles in herdr panes"
	case panes > 0:
		return fmt.Sprintf("%d registered entit(ies) live in herdr panes", panes)
	}
	return ""
}

func (g *Gateway) brokerReport(ctx context.Context, cc bridge.Config) *BrokerReport {
	r := &BrokerReport{Connected: g.broker.Connected(), HeartbeatMs: cc.PresenceEvery.Milliseconds(), Server: g.broker.Server(),
		Delay: g.broker.DelayState(), QueueType: g.queueType, Link: g.broker.Link()}
	if heard := g.core.HeardSelf(); !heard.IsZero() {
		ms := cc.Now().Sub(heard).Milliseconds()
		r.HeardSelfMs = &ms
	}
	if !r.Connected {
		return r
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := g.broker.CheckTopology(ctx); err != nil {
		r.Topology = err.Error()
	}
	return r
}

// herdrErrText is a failed herdr call for a doctor line: a herdr that is
// not running says only that (the line's fix says what to do).
func herdrErrText(err error) string {
	var nr *herdr.NotRunningError
	if errors.As(err, &nr) {
		return "nothing answers (" + nr.Err.Error() + ")"
	}
	return err.Error()
}
