// Command herdbridge is the message fabric for coding agents: a gateway per
// host and the MCP server agents connect to. See README.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/herdbridge/herdbridge/gateway"
)

const usage = `herdbridge — message fabric for coding agents

usage:
  herdbridge gateway  [--listen 127.0.0.1:7077] [--state-dir DIR] [--host-id ID] [--broker amqp[s]://…] [--broker-ca FILE] [--broker-cert FILE --broker-key FILE] [--config FILE] [--fsync=true] [--tls-cert FILE --tls-key FILE]
  herdbridge register --name N --role primary|worker|orchestrator [--group G]... [--state-dir DIR]
  herdbridge register --revoke --name N [--state-dir DIR]   (every token of N stops working)
  herdbridge mcp      --name N --role R [--group G]... [--state-dir DIR]   (stdio MCP server)
  herdbridge roster   [--state-dir DIR] [--json]
  herdbridge stats    [--state-dir DIR] [--json]   (messages refused, by reason; signing; audit log)
  herdbridge dlq list [--state-dir DIR] [--limit N] [--json]
  herdbridge remove   --name N [--state-dir DIR]
  herdbridge demo     [--state-dir DIR]
  herdbridge keys     init|show [--all]|trust HOST KEY…|revoke HOST [KEY…]|rotate  [--state-dir DIR] [--host-id ID]
  herdbridge broker-user --host-id ID [--user NAME] [--vhost /]   (prints a rabbitmqctl recipe: this host's broker user, least privilege)

The state dir defaults to $HERDBRIDGE_STATE_DIR, else $XDG_STATE_HOME/herdbridge,
else ~/.local/state/herdbridge.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "herdbridge:", err)
		}
		os.Exit(1)
	}
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func newFlags(name string, stderr io.Writer) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("state-dir", gateway.DefaultStateDir(), "gateway state directory")
	return fs, dir
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command")
	}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "gateway":
		return cmdGateway(ctx, args, stderr)
	case "register":
		return cmdRegister(args, stdout, stderr)
	case "mcp":
		return cmdMCP(ctx, args, stdin, stdout, stderr)
	case "roster":
		return cmdRoster(args, stdout, stderr)
	case "stats":
		return cmdStats(args, stdout, stderr)
	case "dlq":
		return cmdDLQ(args, stdout, stderr)
	case "remove":
		return cmdRemove(args, stdout, stderr)
	case "demo":
		return cmdDemo(ctx, args, stdout, stderr)
	case "keys":
		return cmdKeys(args, stdout, stderr)
	case "broker-user":
		return cmdBrokerUser(args, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: use debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

func cmdGateway(ctx context.Context, args []string, stderr io.Writer) error {
	fs, dir := newFlags("gateway", stderr)
	listen := fs.String("listen", "127.0.0.1:7077", "HTTP address for MCP (streamable HTTP at /mcp, SSE at /sse)")
	host := fs.String("host-id", gateway.DefaultHost(), "this host's id")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	maxWait := fs.Duration("max-wait", 45*time.Second, "cap of any blocking tool call")
	configPath := fs.String("config", "", "configuration file (default: config.json in the state dir, if present)")
	brokerURL := fs.String("broker", os.Getenv("HERDBRIDGE_BROKER"), "amqp[s]:// URL of the broker gateways meet on (default $HERDBRIDGE_BROKER; empty: embedded, this host only)")
	fsync := fs.Bool("fsync", true, "fsync every commit of the embedded store; false is several times faster and still loses nothing when the gateway process crashes, but an OS crash or power loss can lose or corrupt the store")
	tlsCert := fs.String("tls-cert", "", "PEM certificate (chain) to serve HTTPS; with --tls-key, --listen may be a non-loopback address")
	tlsKey := fs.String("tls-key", "", "PEM private key of --tls-cert")
	brokerCA := fs.String("broker-ca", "", "PEM CA bundle that verifies an amqps:// broker (default: the system roots)")
	brokerCert := fs.String("broker-cert", "", "PEM client certificate for an amqps:// broker (with --broker-key)")
	brokerKey := fs.String("broker-key", "", "PEM private key of --broker-cert")
	brokerOutage := fs.String("broker-outage", "", "while the broker is unreachable, a message for another host is kept at this gateway and published when it returns (spool, the default: the send says queued) or fails within --broker-wait (fail); messages between entities of this host never need the broker")
	brokerWait := fs.Duration("broker-wait", 0, "how long a publish waits for an unreachable broker before it is spooled or fails (default 5s)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := newLogger(stderr, *level)
	if err != nil {
		return err
	}
	cfg := gateway.Config{StateDir: *dir, Listen: *listen, Host: *host, Logger: log, NoSync: !*fsync, Broker: *brokerURL,
		TLSCert: *tlsCert, TLSKey: *tlsKey, BrokerCA: *brokerCA, BrokerCert: *brokerCert, BrokerKey: *brokerKey,
		BrokerOutage: *brokerOutage, BrokerWait: *brokerWait}
	cfg.Core.MaxWait = *maxWait
	cfgPath := *configPath
	if cfgPath == "" {
		cfgPath = filepath.Join(*dir, "config.json")
	}
	if cfg.File, err = gateway.LoadFile(cfgPath, *configPath != ""); err != nil {
		return err
	}
	g, err := gateway.Open(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "herdbridge gateway on %s (state %s, socket %s)\n", g.URL(), g.StateDir(), g.SocketPath())
	err = g.Run(ctx)
	log.Info("shutting down")
	return errors.Join(err, g.Close())
}

func cmdRegister(args []string, stdout, stderr io.Writer) error {
	fs, dir := newFlags("register", stderr)
	name := fs.String("name", "", "entity name (unique on this host)")
	role := fs.String("role", "", "primary, worker or orchestrator")
	pane := fs.String("pane", os.Getenv("HERDR_PANE_ID"), "herdr pane id")
	var groups multiFlag
	fs.Var(&groups, "group", "group to join (repeatable)")
	revoke := fs.Bool("revoke", false, "revoke every token of --name instead of issuing one (register again to get a new one)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *revoke {
		if *role != "" || len(groups) > 0 {
			return errors.New("register --revoke takes only --name (and --state-dir)")
		}
		e, n, err := gateway.RevokeTokens(*dir, *name)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "revoked %d token(s) of %s; register again to get a new one\n", n, e.Name)
		return nil
	}
	if *name == "" || *role == "" {
		return errors.New("register needs --name and --role")
	}
	r, err := gateway.Ask(*dir, gateway.Request{Op: "register", Name: *name, Role: *role, Groups: groups, PaneID: *pane})
	if err != nil {
		return err
	}
	out := map[string]any{"gid": r.Entity.GID, "name": r.Entity.Name, "role": r.Entity.Role, "groups": r.Entity.Groups, "token": r.Token, "url": r.URL + "/mcp"}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// cmdMCP is the stdio MCP server an agent's client starts: it registers
// over the gateway's admin socket and relays stdio to the session there.
func cmdMCP(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs, dir := newFlags("mcp", stderr)
	name := fs.String("name", os.Getenv("HERDBRIDGE_NAME"), "entity name (unique on this host; default $HERDBRIDGE_NAME)")
	role := fs.String("role", os.Getenv("HERDBRIDGE_ROLE"), "primary, worker or orchestrator (default $HERDBRIDGE_ROLE)")
	var groups multiFlag
	if g := os.Getenv("HERDBRIDGE_GROUPS"); g != "" {
		groups = strings.Split(g, ",")
	}
	fs.Var(&groups, "group", "group to join (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *name == "" || *role == "" {
		return errors.New("mcp needs --name and --role")
	}
	pane := ""
	if os.Getenv("HERDR_ENV") == "1" { // inside a herdr pane: register with it
		pane = os.Getenv("HERDR_PANE_ID")
	}
	return gateway.Relay(ctx, *dir, gateway.Request{Op: "mcp", Name: *name, Role: *role, Groups: groups, PaneID: pane}, stdin, stdout, stderr)
}

func cmdRoster(args []string, stdout, stderr io.Writer) error {
	fs, dir := newFlags("roster", stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	r, err := gateway.Ask(*dir, gateway.Request{Op: "roster"})
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(r.Roster)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	for _, h := range r.Roster.Hosts {
		key := ""
		if h.Key != "" {
			key = "\tkey " + h.Key
		}
		fmt.Fprintf(tw, "host %s\tprofiles: %s%s\n", h.Host, strings.Join(h.Profiles, ","), key)
	}
	fmt.Fprintln(tw, "NAME\tROLE\tSTATUS\tHELD\tGROUPS\tGID")
	for _, e := range r.Roster.Entities {
		fmt.Fprintf(tw, "%s@%s\t%s\t%s\t%d\t%s\t%s\n", e.Name, e.Host, e.Role, e.Status, e.Held, strings.Join(e.Groups, ","), e.GID)
	}
	return tw.Flush()
}

func cmdStats(args []string, stdout, stderr io.Writer) error {
	fs, dir := newFlags("stats", stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	r, err := gateway.Ask(*dir, gateway.Request{Op: "stats"})
	if err != nil {
		return err
	}
	if r.Stats == nil {
		return errors.New("stats: the gateway sent none (an older gateway? restart it)")
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(r.Stats)
	}
	st := r.Stats
	signing := "off (embedded transport: this host only)"
	if st.Signing {
		signing = "on, host key " + st.Key
	}
	fmt.Fprintf(stdout, "host %s; signing %s; audit log %s\n", st.Host, signing, st.Audit)
	if st.AuditDropped > 0 || st.AuditError != "" {
		fmt.Fprintf(stdout, "audit records dropped: %d (%s)\n", st.AuditDropped, st.AuditError)
	}
	reasons := make([]string, 0, len(st.Refused))
	for k := range st.Refused {
		reasons = append(reasons, k)
	}
	sort.Strings(reasons)
	if len(reasons) == 0 {
		fmt.Fprintln(stdout, "refused: none")
	}
	for _, k := range reasons {
		fmt.Fprintf(stdout, "refused %-20s %d\n", k, st.Refused[k])
	}
	return nil
}

func cmdDLQ(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "list" {
		return errors.New("usage: herdbridge dlq list [--state-dir DIR] [--limit N] [--json]")
	}
	fs, dir := newFlags("dlq list", stderr)
	limit := fs.Int("limit", 100, "most recent N")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	r, err := gateway.Ask(*dir, gateway.Request{Op: "dlq", Limit: *limit})
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(r.Dead)
	}
	if len(r.Dead) == 0 {
		fmt.Fprintln(stdout, "no dead letters")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tKIND\tMSGID\tFROM\tTO\tREASON\tREPORTED")
	for _, d := range r.Dead {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%v\n", d.At.Format(time.RFC3339), d.Kind, d.MsgID, d.From, d.To, d.Reason, d.Reported)
	}
	return tw.Flush()
}

func cmdRemove(args []string, stdout, stderr io.Writer) error {
	fs, dir := newFlags("remove", stderr)
	name := fs.String("name", "", "entity to remove (its inbox and held messages go with it)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *name == "" {
		return errors.New("remove needs --name")
	}
	r, err := gateway.Ask(*dir, gateway.Request{Op: "remove", Name: *name})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "removed %s (%s)\n", r.Entity.Name, r.Entity.GID)
	return nil
}
