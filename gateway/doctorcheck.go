package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker"
	"github.com/herdbridge/herdbridge/herdr"
	"github.com/herdbridge/herdbridge/keys"
)

// What a doctor check found.
const (
	CheckOK   = "ok"
	CheckWarn = "warn"
	CheckFail = "fail"
)

// SkewWarn is the clock skew against a peer past which doctor warns; past
// the allowance (bridge Config.ClockSkew, 2 minutes by default) it fails.
const SkewWarn = 30 * time.Second

// Check is one line of `herdbridge doctor`.
type Check struct {
	Name   string `json:"name"`
	Status string `json:"status"` // ok | warn | fail
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// DoctorResult is every check, and whether none failed.
type DoctorResult struct {
	OK     bool    `json:"ok"`
	Checks []Check `json:"checks"`
}

// DoctorOptions says where to look.
type DoctorOptions struct {
	StateDir string
	// ConfigPath is the configuration file (default: config.json in the
	// state dir): herdr's socket when no gateway answers.
	ConfigPath string
	// Broker is the broker URL to probe when no gateway answers (a
	// running gateway reports its own link); empty: not probed.
	Broker string
	// Argv is doctor's own command line, checked for a password like the
	// gateway's (nil: not checked).
	Argv    []string
	TLS     *tls.Config
	Timeout time.Duration // per probe (default 5s)
}

// doctor collects the checks.
type doctor struct {
	opts   DoctorOptions
	checks []Check
}

func (d *doctor) add(name, status, detail, fix string) {
	d.checks = append(d.checks, Check{Name: name, Status: status, Detail: detail, Fix: fix})
}

// Doctor runs every check of `herdbridge doctor`: it asks the running
// gateway for what only it knows (herdr, the broker link, the peers'
// trust and clocks) and checks the files of the state dir itself, so it
// says something useful when the gateway is down too.
func Doctor(ctx context.Context, opts DoctorOptions) DoctorResult {
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	d := &doctor{opts: opts}
	rep := d.gatewayCheck()
	d.stateDirCheck()
	d.storesCheck(rep)
	d.keyChecks(rep)
	d.trustFileCheck(rep)
	d.argvCheck(rep)
	if rep != nil {
		d.herdrChecks(rep.Herdr)
		d.brokerChecks(ctx, rep.Broker, rep.Transport)
		d.peerChecks(rep)
		d.sealChecks(rep.Seal)
	} else {
		d.herdrDown(ctx)
		d.brokerDown(ctx)
	}
	res := DoctorResult{OK: true, Checks: d.checks}
	for _, c := range d.checks {
		if c.Status == CheckFail {
			res.OK = false
		}
	}
	return res
}

func (d *doctor) gatewayCheck() *DoctorReport {
	dir := d.opts.StateDir
	r, err := Ask(dir, Request{Op: "doctor"})
	switch {
	case err != nil:
		d.add("gateway", CheckFail, err.Error(), "start it: `herdbridge gateway --state-dir "+dir+"` (or `herdbridge service install`)")
		return nil
	case r.Doctor == nil:
		d.add("gateway", CheckWarn, "the gateway answers but sent no doctor report (an older gateway)", "restart the gateway with this version")
		return nil
	}
	d.add("gateway", CheckOK, fmt.Sprintf("answering: host %s, %s transport, %s", r.Doctor.Host, r.Doctor.Transport, r.Doctor.URL), "")
	return r.Doctor
}

// stateDirCheck: the state dir is 0700 and what it holds is private (a
// public key's .pub excepted).
func (d *doctor) stateDirCheck() {
	dir := d.opts.StateDir
	fi, err := os.Stat(dir)
	if err != nil {
		d.add("state dir", CheckFail, err.Error(), "start the gateway once (it creates "+dir+"), or pass --state-dir")
		return
	}
	var bad, fixes []string
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		bad = append(bad, fmt.Sprintf("%s is %04o", dir, perm))
		fixes = append(fixes, "chmod 700 "+dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		d.add("state dir", CheckFail, err.Error(), "make "+dir+" readable by the user the gateway runs as")
		return
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || strings.HasSuffix(e.Name(), ".pub") || info.Mode()&fs.ModeSymlink != 0 {
			continue
		}
		perm, p := info.Mode().Perm(), filepath.Join(dir, e.Name())
		if perm&0o077 == 0 {
			continue
		}
		bad = append(bad, fmt.Sprintf("%s is %04o", p, perm))
		if info.IsDir() {
			fixes = append(fixes, "chmod 700 "+p)
		} else {
			fixes = append(fixes, "chmod 600 "+p)
		}
	}
	if len(bad) > 0 {
		d.add("state dir", CheckFail, "readable by other users: "+strings.Join(bad, ", "), strings.Join(fixes, "; "))
		return
	}
	d.add("state dir", CheckOK, dir+" and its files are private (0700/0600)", "")
}

// storesCheck: a running gateway has its stores open; without one they
// are checked as a start would.
func (d *doctor) storesCheck(rep *DoctorReport) {
	if rep != nil {
		d.add("stores", CheckOK, "open in the running gateway", "")
		return
	}
	if err := checkStores(d.opts.StateDir); err != nil {
		d.add("stores", CheckFail, err.Error(), "`herdbridge repair --state-dir "+d.opts.StateDir+"`")
		return
	}
	d.add("stores", CheckOK, "state.db and transport.db readable (or not created yet)", "")
}

// keyChecks: the host key loads, matches what the gateway signs with, and
// the trust file parses.
func (d *doctor) keyChecks(rep *DoctorReport) {
	dir := d.opts.StateDir
	path := filepath.Join(dir, keys.KeyFile)
	k, err := keys.Load(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && (rep == nil || rep.Transport == "embedded"):
		d.add("host key", CheckOK, "none yet: only needed across hosts (a gateway on a broker creates it)", "")
	case err != nil && strings.Contains(err.Error(), "chmod 600"):
		d.add("host key", CheckFail, err.Error(), "chmod 600 "+path)
	case err != nil:
		d.add("host key", CheckFail, err.Error(), "restore "+path+" from a backup, or `herdbridge keys rotate` and give the new key to the other hosts")
	case rep != nil && rep.Key != "" && rep.Key != keys.Fingerprint(k.Public()):
		d.add("host key", CheckWarn, fmt.Sprintf("the gateway signs with %s but %s holds %s", rep.Key, path, keys.Fingerprint(k.Public())),
			"restart the gateway to use the key on disk")
	default:
		d.add("host key", CheckOK, keys.Fingerprint(k.Public()), "")
	}
}

// trustFileCheck: the trust file parses, and across hosts it trusts some
// other host.
func (d *doctor) trustFileCheck(rep *DoctorReport) {
	tpath := filepath.Join(d.opts.StateDir, keys.TrustFile)
	m, err := keys.ReadTrust(tpath)
	if err != nil {
		d.add("trust file", CheckFail, err.Error(), "fix or remove the line it names in "+tpath)
		return
	}
	var hosts []string
	for h := range m {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	switch {
	case len(hosts) > 0:
		d.add("trust file", CheckOK, fmt.Sprintf("%d host(s) trusted: %s", len(hosts), strings.Join(hosts, ", ")), "")
	case rep != nil && rep.Transport == "broker":
		d.add("trust file", CheckWarn, "no other host is trusted: their messages and heartbeats are refused",
			"`herdbridge keys trust HOST KEY` for each other host (`herdbridge keys show` there prints KEY)")
	default:
		d.add("trust file", CheckOK, "no other host trusted (only needed across hosts)", "")
	}
}

func (d *doctor) herdrChecks(h *HerdrReport) {
	if h == nil {
		d.add("herdr", CheckOK, "herdr integration disabled: briefs to workers are held for bridge_poll", "")
		return
	}
	if h.Error != "" {
		d.herdrUnreachable(h.Socket, h.Error, h.NeededBy)
		return
	}
	d.herdrProtocol(h.Socket, h.Version, h.Protocol)
	var dead []string
	for _, p := range h.Panes {
		if !p.Alive {
			dead = append(dead, fmt.Sprintf("%s (%s) in pane %s", p.Name, p.Role, p.Pane))
		}
	}
	switch {
	case len(dead) > 0:
		d.add("herdr panes", CheckFail, "herdr no longer lists the pane of "+strings.Join(dead, ", "),
			"`herdbridge remove --name NAME` for each, or restart the agent in a pane (it registers again)")
	default:
		d.add("herdr panes", CheckOK, fmt.Sprintf("%d registered pane(s) alive", len(h.Panes)), "")
	}
}

func (d *doctor) herdrProtocol(socket, version string, protocol int) {
	if protocol < 17 {
		d.add("herdr", CheckWarn, fmt.Sprintf("socket %s: herdr %s, protocol %d: briefs are typed with pane.send_input and polled (17+ has agent.prompt)", socket, version, protocol),
			"upgrade herdr")
		return
	}
	d.add("herdr", CheckOK, fmt.Sprintf("socket %s: herdr %s, protocol %d", socket, version, protocol), "")
}

func herdrFix(socket string) string {
	return "start herdr, or point herdr.socket in config.json (or $HERDR_SOCKET_PATH) at its socket (" + socket + " is where it was looked for)"
}

// herdrDown checks herdr's socket directly when no gateway answers.
func (d *doctor) herdrDown(ctx context.Context) {
	path := d.opts.ConfigPath
	if path == "" {
		path = filepath.Join(d.opts.StateDir, "config.json")
	}
	f, err := LoadFile(path, d.opts.ConfigPath != "")
	if err != nil {
		d.add("herdr", CheckFail, err.Error(), "fix the configuration file")
		return
	}
	if f.Herdr.Disabled {
		d.add("herdr", CheckOK, "herdr integration disabled: briefs to workers are held for bridge_poll", "")
		return
	}
	c := &herdr.Client{Path: f.Herdr.Socket}
	socket := f.Herdr.Socket
	if socket == "" {
		socket, _ = herdr.SocketPath()
	}
	ctx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	defer cancel()
	pong, err := c.Ping(ctx)
	if err != nil {
		d.herdrUnreachable(socket, herdrErrText(err), herdrNeededBy(f, 0))
		return
	}
	d.herdrProtocol(socket, pong.Version, pong.Protocol)
}

// herdrUnreachable judges a herdr that does not answer: a fail when
// something here needs it, else a warning (herdr is optional: without it
// every worker pulls its briefs with bridge_poll).
func (d *doctor) herdrUnreachable(socket, why, neededBy string) {
	if neededBy == "" {
		d.add("herdr", CheckWarn, "socket "+socket+": "+why+"; nothing here needs herdr: briefs to workers are held for bridge_poll",
			"start herdr to have briefs typed into workers' panes (optional)")
		return
	}
	d.add("herdr", CheckFail, "socket "+socket+": "+why+" ("+neededBy+")", herdrFix(socket))
}

// brokerChecks judges a running gateway's broker link: connected, the
// topology present, and its own heartbeats coming back (its login may
// publish and read).
// brokerConnected says what the gateway is connected to: the broker's
// product and version, and what a full inbox does there.
func brokerConnected(s broker.ServerInfo) string {
	what := strings.TrimSpace(s.Product + " " + s.Version)
	if what == "" {
		what = "a broker that did not say what it is"
	}
	full := "refused to the sender and dead-lettered by the broker"
	if s.Overflow == broker.OverflowRejectPublish {
		full = "refused to the sender, dead-lettered by the gateway"
	}
	return "connected to " + what + " (inboxes x-overflow " + s.Overflow + ": a message to a full inbox is " + full + ")"
}

// queueTypeText is the doctor's word on the queue type and why.
func queueTypeText(c broker.QueueTypeChoice) string {
	if c.Type == "" {
		return ""
	}
	return "; " + c.Type + " queues (" + c.Why + ")"
}

func (d *doctor) brokerChecks(ctx context.Context, b *BrokerReport, transport string) {
	if b == nil {
		d.add("broker", CheckOK, transport+" transport: this host only, no broker", "")
		return
	}
	if !b.Connected {
		d.add("broker", CheckFail, "the gateway cannot reach its broker (messages for other hosts are spooled or fail); nodes: "+strings.Join(b.Link.Nodes, ", "),
			"start RabbitMQ, or check --broker (host, port, login) and the network; the gateway reconnects by itself")
		return
	}
	d.add("broker", CheckOK, brokerConnected(b.Server)+queueTypeText(b.QueueType), "")
	d.brokerNode(b.Link)
	if b.Topology != "" {
		d.add("broker topology", CheckFail, b.Topology, "restart the gateway: it declares the exchanges and queues it needs")
	} else {
		d.add("broker topology", CheckOK, "exchanges and dead-letter queue present", "")
	}
	d.add("broker delay", CheckOK, b.Delay.String()+delayMeaning(b.Delay), "")
	every := time.Duration(b.HeartbeatMs) * time.Millisecond
	switch {
	case b.HeardSelfMs == nil:
		d.add("broker login", CheckFail, "this gateway's own heartbeats never came back through the broker",
			"check the broker user's permissions: `herdbridge broker-user --host-id HOST` prints what it needs")
	case time.Duration(*b.HeardSelfMs)*time.Millisecond > 3*every:
		d.add("broker login", CheckFail, fmt.Sprintf("this gateway's own heartbeat last came back %v ago (every %v)", time.Duration(*b.HeardSelfMs)*time.Millisecond, every),
			"check the broker user's permissions: `herdbridge broker-user --host-id HOST` prints what it needs")
	default:
		d.add("broker login", CheckOK, "this login publishes and reads its heartbeats", "")
	}
}

// brokerNode is the connected node, and a warning when the transport
// has been on nodes of two clusters (broker/clustercheck.go).
func (d *doctor) brokerNode(l broker.Link) {
	if l.ClusterMismatch == "" {
		d.add("broker node", CheckOK, l.Describe(), "")
		return
	}
	d.add("broker node", CheckWarn, l.Describe()+"; "+l.ClusterMismatch,
		"list only nodes of one cluster in --broker (`rabbitmqctl cluster_status` on each), then restart the gateway")
}

// brokerDown probes --broker when no gateway answers: every node of it.
func (d *doctor) brokerDown(ctx context.Context) {
	urls := broker.ParseURLs(d.opts.Broker)
	if len(urls) == 0 {
		d.add("broker", CheckWarn, "not checked: no gateway answers and no --broker was given", "pass --broker URL (as the gateway's) to probe it")
		return
	}
	ctx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	defer cancel()
	var down []string
	for _, u := range urls {
		if err := broker.Probe(ctx, u, d.opts.TLS); err != nil {
			down = append(down, err.Error())
		}
	}
	switch {
	case len(down) == len(urls):
		d.add("broker", CheckFail, strings.Join(down, "; "), "start RabbitMQ, or check the URL, its login and the network")
	case len(down) > 0:
		d.add("broker", CheckWarn, fmt.Sprintf("%d of %d nodes reachable, topology present; down: %s", len(urls)-len(down), len(urls), strings.Join(down, "; ")),
			"start the nodes that are down: the gateway fails over to the others meanwhile")
	case len(urls) > 1:
		d.add("broker", CheckOK, fmt.Sprintf("all %d nodes reachable, topology present", len(urls)), "")
	default:
		d.add("broker", CheckOK, "reachable, topology present", "")
	}
}

// peerChecks: trust both ways and the clock of every other host.
func (d *doctor) peerChecks(rep *DoctorReport) {
	if rep.Transport != "broker" {
		return
	}
	allow := time.Duration(rep.ClockSkewMs) * time.Millisecond
	for _, p := range rep.Peers {
		d.trustCheck(p, rep.Host)
		if p.SkewMs != nil {
			d.skewCheck(p, allow)
		}
	}
}

func (d *doctor) trustCheck(p bridge.PeerView, self string) {
	name := "trust " + p.Host
	switch {
	case p.Trust == bridge.TrustBoth:
		d.add(name, CheckOK, "both ways (its key "+p.Key+")", "")
	case p.Trust == bridge.TrustOneWay || p.Trust == bridge.TrustUntrusted:
		detail, fix, _ := strings.Cut(p.Why, "; ")
		if fix == "" {
			detail, fix = p.Why, ""
		}
		d.add(name, CheckFail, p.Trust+": "+detail, fix)
	case p.LastHeartbeat == nil && p.SkewMs == nil:
		d.add(name, CheckWarn, "trusted here, but no heartbeat of "+p.Host+" is heard: its gateway is down or on another broker",
			"start the gateway of "+p.Host+", or `herdbridge keys revoke "+p.Host+"` if it is gone for good")
	case p.LastHeartbeat == nil:
		d.add(name, CheckWarn, "its heartbeats are all refused for their timestamps: its trust cannot be read", "fix its clock (see clock "+p.Host+")")
	default:
		d.add(name, CheckWarn, "unknown whether "+p.Host+" trusts "+self+": "+p.Why, "upgrade the gateway of "+p.Host)
	}
}

func (d *doctor) skewCheck(p bridge.PeerView, allow time.Duration) {
	skew := time.Duration(*p.SkewMs) * time.Millisecond
	dir := "ahead of"
	if skew < 0 {
		dir = "behind"
	}
	abs := max(skew, -skew)
	detail := fmt.Sprintf("%s is %v %s this clock", p.Host, abs.Round(time.Millisecond), dir)
	fix := "synchronize both clocks with NTP (`timedatectl set-ntp true`, chrony)"
	switch {
	case abs > allow:
		d.add("clock "+p.Host, CheckFail, fmt.Sprintf("%s: past the %v allowance, its messages are refused (expired or future-ts)", detail, allow), fix)
	case p.SkewRefused:
		d.add("clock "+p.Host, CheckFail, detail+": its heartbeats are refused for their timestamp (a heartbeat gets no allowance on its expiry), so its entities drop out of the roster", fix)
	case abs > SkewWarn:
		d.add("clock "+p.Host, CheckWarn, fmt.Sprintf("%s (the allowance is %v)", detail, allow), fix)
	default:
		d.add("clock "+p.Host, CheckOK, detail, "")
	}
}

// delayMeaning says what the delay state changes, for doctor: optional
// either way, so it is never a warning.
func delayMeaning(s bridge.DelayState) string {
	if s.On {
		return ": a notice a transport refuses is also handed to the broker for a retry that outlives this gateway"
	}
	return ": optional; notices a transport refuses are retried by this gateway alone"
}
