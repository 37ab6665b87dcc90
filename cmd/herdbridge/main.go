// Command herdbridge is the message fabric for coding agents: a gateway per
// host and the MCP server agents connect to. See README.md.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/herdbridge/herdbridge/cliout"
	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/mcp"
)

func main() {
	mcp.Version = serverVersion()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		if r := (*reportedError)(nil); !errors.As(err, &r) {
			fmt.Fprintln(os.Stderr, "herdbridge:", err)
		}
		var u *usageError
		if errors.As(err, &u) {
			fmt.Fprintf(os.Stderr, "usage: %s\nrun '%s --help' for the flags and an example\n", u.line, u.path)
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// run executes one command line; main maps a *usageError to exit status 2
// and any other error to 1. --help and -h print to stdout and return nil.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	root := newRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	return root.ExecuteContext(ctx)
}

func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "herdbridge",
		Short: "herdbridge — message fabric for coding agents",
		Long: `herdbridge — message fabric for coding agents: a gateway per host, and the MCP server
agents (Claude Code, Codex, Cursor, …) connect to.

The state dir defaults to $HERDBRIDGE_STATE_DIR, else $XDG_STATE_HOME/herdbridge,
else ~/.local/state/herdbridge. Every flag can also be set as HERDBRIDGE_<FLAG>
(dashes as underscores: HERDBRIDGE_STATE_DIR, HERDBRIDGE_HOST_ID; --group as the
comma-separated HERDBRIDGE_GROUPS); a flag on the command line wins.`,
		Example: `  herdbridge gateway                       # start this host's gateway
  herdbridge setup claude                  # connect Claude Code in this repository
  herdbridge roster                        # who is connected`,
		Version:           versionText(),
		SilenceErrors:     true,
		SilenceUsage:      true,
		Args:              noArgs,
		PersistentPreRunE: func(c *cobra.Command, _ []string) error { return flagsFromEnv(c) },
		RunE: func(c *cobra.Command, _ []string) error {
			c.SetOut(stderr)
			_ = c.Usage()
			return &usageError{err: errors.New("no command"), line: c.UseLine() + " COMMAND", path: c.CommandPath()}
		},
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetVersionTemplate("{{.Version}}")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &usageError{err: err, line: c.UseLine(), path: c.CommandPath()}
	})
	root.AddCommand(
		gatewayCommand(), registerCommand(stdout), mcpCommand(stdin, stdout, stderr),
		rosterCommand(stdout), statsCommand(stdout), doctorCommand(stdout), uiCommand(stdout, stderr), dlqCommand(stdout), removeCommand(stdout), repairCommand(stdout), historyCommand(stdout),
		demoCommand(stdout), keysCommand(stdout, stderr), pairCommand(stdin, stdout, stderr), brokerUserCommand(stdout),
		setupCommand(stdout, stderr), skillCommand(stdout), serviceCommand(stdout, stderr), versionCommand(stdout),
		traceCommand(stdout), loadtestCommand(stdout, stderr),
	)
	root.InitDefaultCompletionCmd() // completion bash|zsh|fish|powershell (cobra's, so it covers every flag)
	return root
}

// usageError is a command line that does not parse (an unknown command or
// flag, a bad value, a stray argument): exit status 2 with the usage line.
type usageError struct {
	err        error
	line, path string
}

func (u *usageError) Error() string { return u.err.Error() }
func (u *usageError) Unwrap() error { return u.err }

// noArgs refuses positional arguments as a usage error.
func noArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		if c.HasAvailableSubCommands() {
			return &usageError{err: fmt.Errorf("unknown command %q for %q", args[0], c.CommandPath()), line: c.UseLine(), path: c.CommandPath()}
		}
		return &usageError{err: fmt.Errorf("%s: unexpected argument %q", c.Name(), args[0]), line: c.UseLine(), path: c.CommandPath()}
	}
	return nil
}

// needSubcommand is the RunE of a command that only groups subcommands.
func needSubcommand(c *cobra.Command, args []string) error {
	if err := noArgs(c, args); err != nil {
		return err
	}
	names := []string{}
	for _, s := range c.Commands() {
		if s.IsAvailableCommand() {
			names = append(names, s.Name())
		}
	}
	return &usageError{err: fmt.Errorf("%s needs a subcommand: %s", c.Name(), strings.Join(names, ", ")), line: c.UseLine(), path: c.CommandPath()}
}

// flagsFromEnv sets every flag of c not given on the command line from
// HERDBRIDGE_<FLAG> (upper case, dashes as underscores), if that is set;
// the repeatable --group comes from the comma-separated HERDBRIDGE_GROUPS.
func flagsFromEnv(c *cobra.Command) error {
	var errs []error
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Changed || f.Name == "help" || f.Name == "version" {
			return
		}
		key := envName(f.Name)
		v, ok := os.LookupEnv(key)
		if !ok || v == "" {
			return
		}
		vals := []string{v}
		if f.Value.Type() == "stringArray" {
			vals = strings.Split(v, ",")
		}
		for _, x := range vals {
			if err := f.Value.Set(strings.TrimSpace(x)); err != nil {
				errs = append(errs, &usageError{err: fmt.Errorf("%s=%q: %v", key, v, err), line: c.UseLine(), path: c.CommandPath()})
				return
			}
		}
	})
	return errors.Join(errs...)
}

// envName is the variable that sets a flag: HERDBRIDGE_STATE_DIR for
// --state-dir; HERDBRIDGE_GROUPS for --group (the name it always had).
func envName(flag string) string {
	if flag == "group" {
		return "HERDBRIDGE_GROUPS"
	}
	return "HERDBRIDGE_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// newFlags gives a command its flag set and the --state-dir every command
// takes.
func newFlags(c *cobra.Command) (*pflag.FlagSet, *string) {
	fs := c.Flags()
	fs.SortFlags = false
	dir := fs.String("state-dir", gateway.DefaultStateDir(), "gateway state directory")
	_ = c.MarkFlagDirname("state-dir")
	return fs, dir
}

// newLogger is the gateway's logger: slog's text (key=value) or JSON (one
// object a line, for log shippers) handler on w, at level and above.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: use text or json", format)
}

func gatewayCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "gateway [flags]",
		Short: "Run this host's gateway (MCP over HTTP, the admin socket, the transport)",
		Long: `Run this host's gateway: MCP over streamable HTTP (/mcp) and SSE (/sse), the admin
socket agents' stdio MCP servers register on, and the transport — embedded (this host
only) or, with --broker, RabbitMQ/LavinMQ to meet other hosts' gateways.`,
		Example: `  herdbridge gateway                                   # 127.0.0.1:7077, embedded transport
  herdbridge gateway --broker amqp://user@mq:5672/ --broker-password-file ~/.config/herdbridge/broker.pass  # across hosts
  HERDBRIDGE_STATE_DIR=/tmp/hb herdbridge gateway --listen 127.0.0.1:0`,
		Args: noArgs,
	}
	fs, dir := newFlags(c)
	listen := fs.String("listen", "127.0.0.1:7077", "HTTP address for MCP (streamable HTTP at /mcp, SSE at /sse)")
	host := fs.String("host-id", gateway.DefaultHost(), "this host's id")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	logFormat := fs.String("log-format", "text", "text (key=value) or json (one JSON object a line); every line about a message carries msgId and traceId")
	maxWait := fs.Duration("max-wait", 45*time.Second, "cap of any blocking tool call")
	configPath := fs.String("config", "", "configuration file (default: config.json in the state dir, if present)")
	brokerURL := addBrokerFlag(fs, "amqp[s]:// URL of the broker gateways meet on (default $HERDBRIDGE_BROKER, else the config file's broker/brokers; empty: embedded, this host only)")
	brokerPasswordFile := brokerPasswordFlag(fs)
	fsync := fs.Bool("fsync", true, "fsync every commit of the embedded store; false is several times faster and still loses nothing when the gateway process crashes, but an OS crash or power loss can lose or corrupt the store")
	tlsCert := fs.String("tls-cert", "", "PEM certificate (chain) to serve HTTPS; with --tls-key, --listen may be a non-loopback address")
	tlsKey := fs.String("tls-key", "", "PEM private key of --tls-cert")
	brokerCA := fs.String("broker-ca", "", "PEM CA bundle that verifies an amqps:// broker (default: the system roots)")
	brokerCert := fs.String("broker-cert", "", "PEM client certificate for an amqps:// broker (with --broker-key)")
	brokerKey := fs.String("broker-key", "", "PEM private key of --broker-cert")
	seal := fs.String("seal", "", `bodies to other hosts sealed to their HPKE key: auto (default: sealed when the host's key is known, else clear), require (never clear: refused instead), off; overrides "seal" in config.json`)
	brokerOutage := fs.String("broker-outage", "", "while the broker is unreachable, a message for another host is kept at this gateway and published when it returns (spool, the default: the send says queued) or fails within --broker-wait (fail); messages between entities of this host never need the broker")
	queueType := fs.String("queue-type", os.Getenv("HERDBRIDGE_QUEUE_TYPE"), "type of the broker's inbox, control and dead-letter queues: auto (quorum on a RabbitMQ cluster of at least 3 --broker nodes, classic otherwise; remembered in the state dir), classic or quorum (default $HERDBRIDGE_QUEUE_TYPE, else queueType in config.json, else auto); changing it migrates the queues")
	brokerWait := fs.Duration("broker-wait", 0, "how long a publish waits for an unreachable broker before it is spooled or fails (default 5s)")
	history := fs.Bool("history", false, "keep every local entity's history of the messages it sent and received (bridge_history; <state-dir>/history, mode 0600); without it only entities registered with --history have one")
	perEntity := fs.Bool("presence-per-entity", false, "heartbeat every entity every period as gateways before presence by host did (no digest, deltas or snapshots): the baseline `make scale` measures; never needed for an upgrade")
	c.RunE = func(c *cobra.Command, _ []string) error {
		ctx, stderr := c.Context(), c.ErrOrStderr()
		log, err := newLogger(stderr, *level, *logFormat)
		if err != nil {
			return err
		}
		cfg := gateway.Config{StateDir: *dir, Listen: *listen, Host: *host, Logger: log, NoSync: !*fsync, Broker: brokerURL.String(),
			TLSCert: *tlsCert, TLSKey: *tlsKey, BrokerCA: *brokerCA, BrokerCert: *brokerCert, BrokerKey: *brokerKey,
			BrokerOutage: *brokerOutage, BrokerWait: *brokerWait, History: *history, QueueType: *queueType, Seal: *seal}
		cfg.Core.MaxWait, cfg.Core.PresencePerEntity = *maxWait, *perEntity
		if cfg.File, err = gateway.StateConfig(*dir, *configPath); err != nil {
			return err
		}
		if cfg.Broker, err = gateway.ConfigBroker(cfg.Broker, *brokerPasswordFile, cfg.File); err != nil {
			return err
		}
		g, err := gateway.Open(ctx, cfg)
		if err != nil {
			return err
		}
		if *logFormat == "text" { // in JSON every line is an object: "gateway serving" says the same
			fmt.Fprintf(stderr, "herdbridge gateway on %s (state %s, socket %s)\n", g.URL(), g.StateDir(), g.SocketPath())
		}
		err = g.Run(ctx)
		log.Info("shutting down")
		return errors.Join(err, g.Close())
	}
	return c
}

func registerCommand(stdout io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:   "register --name N --role primary|worker|orchestrator [--group G]...",
		Short: "Register an entity and print a bearer token for MCP over HTTP",
		Long: `Register an entity (or re-register: same gid and inbox) and print a new bearer token
for MCP over HTTP; the last 32 tokens stay valid. With --revoke, every token of --name
stops working at once.`,
		Example: `  herdbridge register --name lead --role primary
  herdbridge register --name w1 --role worker --group build
  herdbridge register --revoke --name lead`,
		Args: noArgs,
	}
	fs, dir := newFlags(c)
	name := fs.String("name", "", "entity name (unique on this host)")
	role := fs.String("role", "", "primary, worker or orchestrator")
	pane := fs.String("pane", os.Getenv("HERDR_PANE_ID"), "herdr pane id")
	var groups []string
	fs.StringArrayVar(&groups, "group", nil, "group to join (repeatable)")
	revoke := fs.Bool("revoke", false, "revoke every token of --name instead of issuing one (register again to get a new one)")
	noStart := fs.Bool("no-start", false, "do not start a gateway when none answers on the state dir")
	takeover := fs.Bool("takeover", false, "take the name from the live `mcp` session holding it (refused otherwise)")
	history := historyFlag(fs)
	_ = c.RegisterFlagCompletionFunc("role", roleCompletion)
	c.RunE = func(c *cobra.Command, _ []string) error {
		if *name == "" && !*revoke && gateway.InHerdr() != "" {
			*name, _ = gateway.DefaultName(c.Context())
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
		if err := gateway.EnsureRunning(*dir, gateway.StartOptions{NoStart: *noStart, Notice: c.ErrOrStderr()}); err != nil {
			return err
		}
		r, err := gateway.Ask(*dir, gateway.Request{Op: "register", Name: *name, Role: *role, Groups: groups, PaneID: *pane, Takeover: *takeover,
			History: history(c)})
		if err != nil {
			return err
		}
		out := map[string]any{"gid": r.Entity.GID, "name": r.Entity.Name, "role": r.Entity.Role, "groups": r.Entity.Groups, "token": r.Token, "url": r.URL + "/mcp"}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	return c
}

func roleCompletion(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return []string{"primary", "worker", "orchestrator"}, cobra.ShellCompDirectiveNoFileComp
}

// mcpCommand is the stdio MCP server an agent's client starts: it registers
// over the gateway's admin socket and relays stdio to the session there.
func mcpCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:   "mcp --name N --role R [--group G]...",
		Short: "Serve MCP over stdio for one agent (what an agent's MCP client starts)",
		Long: `Serve MCP over stdio for one agent: the agent's MCP client starts this command; it
registers over the gateway's admin socket (re-attaching to the entity if the name exists)
and relays stdio to a session there. Inside a herdr pane the pane is recorded.`,
		Example: `  herdbridge mcp --name lead --role primary
  claude mcp add herdbridge -- herdbridge mcp --name worker-1 --role worker --group build
  HERDBRIDGE_NAME=lead HERDBRIDGE_ROLE=primary herdbridge mcp`,
		Args: noArgs,
	}
	fs, dir := newFlags(c)
	name := fs.String("name", os.Getenv("HERDBRIDGE_NAME"), "entity name (unique on this host; default $HERDBRIDGE_NAME, else in a herdr pane its agent's name or <dir>-<pane id>, else --default-name)")
	role := fs.String("role", os.Getenv("HERDBRIDGE_ROLE"), "primary, worker or orchestrator (default $HERDBRIDGE_ROLE)")
	var groups []string
	fs.StringArrayVar(&groups, "group", nil, "group to join (repeatable; default the comma-separated $HERDBRIDGE_GROUPS)")
	defName := fs.String("default-name", "", "name when neither --name nor $HERDBRIDGE_NAME gives one (what herdbridge setup writes: a spawned worker's own name wins)")
	defRole := fs.String("default-role", "", "role when neither --role nor $HERDBRIDGE_ROLE gives one (what herdbridge setup writes)")
	noStart := fs.Bool("no-start", false, "do not start a gateway when none answers on the state dir")
	takeover := fs.Bool("takeover", false, "take the name from the live session holding it (refused otherwise)")
	history := historyFlag(fs)
	_ = c.RegisterFlagCompletionFunc("role", roleCompletion)
	_ = c.RegisterFlagCompletionFunc("default-role", roleCompletion)
	c.RunE = func(c *cobra.Command, _ []string) error {
		ctx := c.Context()
		sessionName, err := gateway.SessionName(ctx, *name, *defName)
		if err != nil {
			return refuseMCP(fmt.Errorf("mcp: %w", err), stdin, stdout, stderr)
		}
		*name, *role = sessionName, cmp.Or(*role, *defRole)
		if *role == "" {
			return refuseMCP(errors.New("mcp needs --role"), stdin, stdout, stderr)
		}
		if err := gateway.EnsureRunning(*dir, gateway.StartOptions{NoStart: *noStart, Notice: stderr}); err != nil {
			return refuseMCP(err, stdin, stdout, stderr)
		}
		pane := gateway.InHerdr() // inside a herdr pane: register with it
		req := gateway.Request{Op: "mcp", Name: *name, Role: *role, Groups: groups, PaneID: pane, Takeover: *takeover, History: history(c)}
		err = gateway.Relay(ctx, *dir, req, stdin, stdout, stderr)
		if se := (*gateway.StartError)(nil); errors.As(err, &se) {
			return refuseMCP(se.Err, stdin, stdout, stderr)
		}
		return err
	}
	return c
}

func rosterCommand(stdout io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:     "roster [--json]",
		Short:   "List hosts with their spawn profiles, and entities with role, status and held count",
		Example: "  herdbridge roster\n  herdbridge roster --json | jq '.entities[].name'",
		Args:    noArgs,
	}
	fs, dir := newFlags(c)
	asJSON := fs.Bool("json", false, "print JSON")
	c.RunE = func(*cobra.Command, []string) error {
		r, err := gateway.Ask(*dir, gateway.Request{Op: "roster"})
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(stdout).Encode(r.Roster)
		}
		return cliout.Roster(stdout, r.Roster)
	}
	return c
}

func statsCommand(stdout io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:     "stats [--json]",
		Short:   "Show messages refused (by reason), signing and the audit log",
		Example: "  herdbridge stats\n  herdbridge stats --json",
		Args:    noArgs,
	}
	fs, dir := newFlags(c)
	asJSON := fs.Bool("json", false, "print JSON")
	c.RunE = func(*cobra.Command, []string) error {
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
		return cliout.Stats(stdout, r.Stats)
	}
	return c
}

func dlqCommand(stdout io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:     "dlq list [--limit N] [--json]",
		Short:   "Dead letters (poison messages, expired in the broker) and whether their senders were told",
		Example: "  herdbridge dlq list\n  herdbridge dlq list --limit 10 --json",
		Args:    noArgs,
	}
	list := &cobra.Command{
		Use:     "list [--limit N] [--json]",
		Short:   "List the most recent dead letters",
		Example: "  herdbridge dlq list --limit 10",
		Args:    noArgs,
	}
	c.AddCommand(list)
	c.RunE = needSubcommand
	fs, dir := newFlags(list)
	limit := fs.Int("limit", 100, "most recent N")
	asJSON := fs.Bool("json", false, "print JSON")
	list.RunE = func(*cobra.Command, []string) error {
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
		return cliout.DeadLetters(stdout, r.Dead)
	}
	return c
}

func removeCommand(stdout io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:     "remove --name N",
		Short:   "Remove an entity; its inbox and held messages go with it",
		Example: "  herdbridge remove --name worker-1",
		Args:    noArgs,
	}
	fs, dir := newFlags(c)
	name := fs.String("name", "", "entity to remove (its inbox and held messages go with it)")
	c.RunE = func(*cobra.Command, []string) error {
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
	return c
}

func repairCommand(stdout io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:   "repair [--state-dir DIR]",
		Short: "Salvage damaged store files (state.db, transport.db) so the gateway starts again",
		Long: `Salvage damaged store files: with no gateway running, each of state.db and
transport.db that fails the checks a gateway runs at start (zero length, truncated,
unreadable pages) is copied key by key into a fresh file with whatever is still
readable; the damaged file is kept aside, renamed with a .damaged-<UTC time> suffix,
never deleted. It prints what it kept and lost per file, and inboxes left with no
registered entity. Healthy files are left as they are.`,
		Example: `  herdbridge repair
  herdbridge repair --state-dir ~/.local/state/herdbridge`,
		Args: noArgs,
	}
	_, dir := newFlags(c)
	c.RunE = func(*cobra.Command, []string) error {
		report, err := gateway.Repair(*dir, time.Now())
		fmt.Fprint(stdout, report)
		return err
	}
	return c
}

// historyFlag adds --history to a registering command; the returned
// function gives the request's History: set only when the flag was given,
// so a reconnect without it leaves the entity's setting as it is.
func historyFlag(fs *pflag.FlagSet) func(*cobra.Command) *bool {
	on := fs.Bool("history", false, "keep this entity's history of the messages it sends and receives (bridge_history); --history=false turns it off")
	return func(c *cobra.Command) *bool {
		if !c.Flags().Changed("history") {
			return nil
		}
		return on
	}
}

func historyCommand(stdout io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:     "history purge [--name N]",
		Short:   "Clear entities' message histories",
		Example: "  herdbridge history purge --name lead\n  herdbridge history purge",
		Args:    noArgs,
	}
	purge := &cobra.Command{
		Use:   "purge [--name N]",
		Short: "Delete the history of --name, or of every entity of this gateway",
		Long: `Delete the history of --name (its <state-dir>/history/<name>.jsonl), or without --name
every entity's. Through the running gateway when one answers on the state dir, else directly.`,
		Example: "  herdbridge history purge --name lead",
		Args:    noArgs,
	}
	c.AddCommand(purge)
	c.RunE = needSubcommand
	fs, dir := newFlags(purge)
	name := fs.String("name", "", "the entity whose history goes (default: every entity's)")
	purge.RunE = func(*cobra.Command, []string) error {
		n, err := gateway.PurgeHistory(*dir, *name)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "purged %d history file(s)\n", n)
		return nil
	}
	return c
}
