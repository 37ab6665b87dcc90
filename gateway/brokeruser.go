package gateway

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/bridge/broker"
)

// brokerResource is one broker resource a gateway uses, with the AMQP
// 0-9-1 operations that need each permission on it ("" = not needed).
type brokerResource struct {
	kind, re                  string // "exchange" or "queue"; anchored-later regex of its name
	configure, write, readOps string
}

// brokerResources lists every exchange and queue the gateway of host
// touches and why (bridge/broker: the topology of SPEC §5). Permissions
// per operation (RabbitMQ and LavinMQ alike): exchange.declare and
// queue.declare/delete = configure on the entity; queue.bind/unbind =
// write on the queue and read on the exchange; basic.publish = write on
// the exchange; basic.consume/get = read on the queue. RabbitMQ also
// checks, for a queue declared with x-dead-letter-exchange, read on the
// queue and write on that exchange. Dead-lettering itself is done by the
// broker and needs nothing of the gateway — except under reject-publish
// (LavinMQ), where the gateway publishes a refused message to bridge.dlx
// itself, with that same write.
func brokerResources(host string) []brokerResource {
	h := regexp.QuoteMeta(host)
	return []brokerResource{
		{"exchange", `bridge\.msg`, "exchange.declare", "publish messages", "bind inboxes"},
		{"exchange", `bridge\.roster`, "exchange.declare", "publish presence", "bind roster." + host},
		{"exchange", `bridge\.control`, "exchange.declare", "publish control (spawn) to any host", "bind control." + host},
		{"exchange", `bridge\.dlx`, "exchange.declare", "declare queues dead-lettering to it (RabbitMQ checks); dead-letter what a full inbox refused (LavinMQ)", "bind bridge.dlq"},
		{"queue", `bridge\.dlq`, "queue.declare", "bind to bridge.dlx", "consume dead letters"},
		// optional (bridge/broker/delay.go): where the broker has
		// x-delayed-message; bridge.msg's write covers the other end of
		// the exchange-to-exchange binding
		{"exchange", `bridge\.delay`, "exchange.declare (where the broker has x-delayed-message)", "publish delayed notices", "bind bridge.msg to it"},
		{"queue", `agent\.[^.]+\.inbox\.v2`, "queue.declare/delete of inboxes", "bind/unbind to bridge.msg", "consume inboxes"},
		{"queue", `control\.` + h, "queue.declare", "bind to bridge.control", "consume control messages"},
		{"queue", `roster\.` + h, "queue.declare", "bind to bridge.roster", "consume presence"},
		// herdbridge pair (keys/pairing): one exclusive, auto-delete queue
		// per side, named by the code's public nameplate, the joiner's
		// with its session id (pairing.InitiatorAddr and joinerAddr).
		{"exchange", `bridge\.pair`, "exchange.declare", "publish pairing messages (herdbridge pair)", "bind pairing queues"},
		{"queue", pairQueueRE, "queue.declare (exclusive, auto-delete)", "bind to bridge.pair", "consume pairing messages"},
	}
}

// pairQueueRE names the queues of herdbridge pair: pair.<nameplate> and
// pair.<nameplate>.<session id, hex>.
const pairQueueRE = `pair\.[0-9A-Z]{2}(\.[0-9a-f]{32})?`

// BrokerPermissions are the configure, write and read regexes of the
// broker user of host's gateway: anchored, dots escaped, exactly the
// resources of brokerResources. They name the same resources in all three
// columns (each resource needs all three), but nothing of another host:
// not control.<other>, not roster.<other>.
func BrokerPermissions(host string) (configure, write, read string) {
	var c, w, r []string
	for _, res := range brokerResources(host) {
		if res.configure != "" {
			c = append(c, res.re)
		}
		if res.write != "" {
			w = append(w, res.re)
		}
		if res.readOps != "" {
			r = append(r, res.re)
		}
	}
	anchor := func(alts []string) string {
		if len(alts) == 0 {
			return "^$"
		}
		return "^(" + strings.Join(alts, "|") + ")$"
	}
	return anchor(c), anchor(w), anchor(r)
}

// BrokerTopicPermissions is the optional, RabbitMQ-only topic permission
// of host's user: on bridge.roster it may publish only with the routing
// key roster.<host> (so it cannot announce presence as another host) and
// bind only with roster.# (what every gateway binds its roster queue with).
func BrokerTopicPermissions(host string) (exchange, write, read string) {
	return broker.ExchangeRoster, `^roster\.` + regexp.QuoteMeta(host) + `$`, `^roster\.#$`
}

var brokerUserRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// shq quotes s for a POSIX shell.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// brokerUserRecipe is the POSIX shell recipe that creates (or updates) the
// broker user of host's gateway with exactly the permissions it needs.
func brokerUserRecipe(host, user, vhost string) string {
	conf, write, read := BrokerPermissions(host)
	tx, tw, tr := BrokerTopicPermissions(host)
	path := "/"
	if vhost != "/" {
		path = "/" + strings.ReplaceAll(url.PathEscape(vhost), "$", "%24") // printed in double quotes
	}
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	p("#!/bin/sh")
	p("# Broker user %s for the herdbridge gateway of host %s, on vhost %s", user, host, vhost)
	p("# (printed by `herdbridge broker-user --host-id %s`). Run it as a broker administrator", host)
	p("# where rabbitmqctl reaches the broker node (Debian: as root; or set RABBITMQCTL).")
	p("# The password is $HERDBRIDGE_BROKER_PASSWORD; unset, one is generated and printed once.")
	p("# Running it again keeps the user and sets its password and permissions anew.")
	p("#")
	p("# What the gateway does on the broker, and the permission each needs:")
	for _, r := range brokerResources(host) {
		name := strings.ReplaceAll(r.re, pairQueueRE, "pair.<code>[.<session>]")
		name = strings.ReplaceAll(name, `\.`, ".")
		name = strings.ReplaceAll(name, "[^.]+", "<gid>")
		name = strings.ReplaceAll(name, `\`, "")
		p("#   %-8s %-22s configure: %s; write: %s; read: %s", r.kind, name, r.configure, r.write, r.readOps)
	}
	p("# (exchange.declare, queue.declare/delete = configure; queue.bind = write on the queue + read on")
	p("# the exchange; basic.publish = write on the exchange; basic.consume = read on the queue; dead-")
	p("# lettering is done by the broker.) So the three regexes below name the same resources, and none")
	p("# of another host: a gateway logging in as %s cannot declare, delete, bind or consume", user)
	p("# control.<other host> or roster.<other host> — it cannot take another host's spawns or presence.")
	p("#")
	p("# Limits, by design:")
	p("#  - agent.<gid>.inbox.v2 cannot be narrowed to this host: a gid is a random UUID, not scoped to")
	p("#    a host (a spawned worker even gets the gid the requesting host chose). So every gateway's user")
	p("#    may declare, bind, consume or delete any inbox. What protects them: a gateway consumes its")
	p("#    agents' inboxes with exclusive consumers (another connection is refused while it runs), and")
	p("#    the receiving gateway checks every message's ed25519 signature against the sending host's key")
	p("#    (a forged or foreign-signed message is dead-lettered). AMQP permissions do not cover binding")
	p("#    keys either: a login can bind a queue it may declare to bridge.msg or bridge.control with")
	p("#    another host's key and read copies. Per-host users stop impersonation of control and presence")
	p("#    queues and contain a wrong --host-id; they do not keep hosts' traffic secret from each other:")
	p("#    for that, give mutually distrusting groups their own vhost or broker.")
	p("#  - bridge.dlq is shared: every gateway may read every dead letter.")
	p("#  - The broker's disk holds task text: messages are persistent in durable inboxes, control queues")
	p("#    and bridge.dlq. Protect the broker host, its data directory and its backups like the gateways'")
	p("#    state directories (disk encryption, access).")
	p("#  - Use amqps:// (a TLS listener, 5671) and delete the guest user or keep it loopback-only.")
	p("#")
	p("# LavinMQ has the same configure/write/read permissions: `lavinmqctl add_user USER PASSWORD`,")
	p("# `lavinmqctl set_permissions -p VHOST USER CONFIGURE WRITE READ` with the regexes below; it has no")
	p("# topic permissions (skip step 3).")
	p("set -eu")
	p("ctl=${RABBITMQCTL:-rabbitmqctl}")
	p("user=%s", shq(user))
	p("vhost=%s", shq(vhost))
	p("configure=%s", shq(conf))
	p("write=%s", shq(write))
	p("read=%s", shq(read))
	p("generated=")
	p(`if [ -n "${HERDBRIDGE_BROKER_PASSWORD:-}" ]; then`)
	p(`  password=$HERDBRIDGE_BROKER_PASSWORD`)
	p("else")
	p("  password=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \\n')  # 192 bits, hex: safe in a URL")
	p("  generated=1")
	p("fi")
	p("# 1. the user. The password goes on stdin, not the command line (ps): rabbitmqctl reads it")
	p("#    there when it is left out (tested with 3.10).")
	p(`if $ctl -q list_users --no-table-headers | cut -f1 | grep -Fqx -- "$user"; then`)
	p(`  printf '%%s\n' "$password" | $ctl -q change_password "$user"`)
	p("else")
	p(`  printf '%%s\n' "$password" | $ctl -q add_user "$user"`)
	p("fi")
	p("# 2. its permissions on the vhost: configure, write, read (AMQP 0-9-1; RabbitMQ and LavinMQ)")
	p(`$ctl -q set_permissions -p "$vhost" "$user" "$configure" "$write" "$read"`)
	p("# 3. OPTIONAL, RabbitMQ only (topic permissions; LavinMQ has none): on %s publish presence", tx)
	p("#    only as this host (routing key roster.%s) and bind only roster.#. Skip: HERDBRIDGE_TOPIC_PERMISSIONS=0", host)
	p(`if [ "${HERDBRIDGE_TOPIC_PERMISSIONS:-1}" != 0 ]; then`)
	p(`  $ctl -q set_topic_permissions -p "$vhost" "$user" %s %s %s`, shq(tx), shq(tw), shq(tr))
	p("fi")
	p(`echo "broker user $user: permissions on vhost $vhost set"`)
	p(`if [ -n "$generated" ]; then echo "password of $user (generated; shown once, store it): $password"; fi`)
	p(`echo "gateway: herdbridge gateway --host-id %s --broker 'amqps://$user@BROKER-HOST:5671%s' --broker-password-file FILE --broker-ca CA.pem [--broker-cert CERT.pem --broker-key KEY.pem]  (FILE: the password on its first line, mode 0600)"`, host, path)
	return b.String()
}

// BrokerUserRecipe checks host, user (default herdbridge-HOST) and vhost
// and returns the recipe of brokerUserRecipe: `herdbridge broker-user`.
func BrokerUserRecipe(host, user, vhost string) (string, error) {
	if host == "" {
		return "", errors.New("broker-user needs --host-id (the id of the gateway's host, as its gateway's --host-id)")
	}
	if !bridge.ValidHost(host) {
		return "", fmt.Errorf("broker-user: %q is not a valid host id", host)
	}
	if user == "" {
		user = "herdbridge-" + host
	}
	if !brokerUserRE.MatchString(user) {
		return "", fmt.Errorf("broker-user: user %q: use letters, digits, '.', '_' and '-'", user)
	}
	if vhost == "" || strings.ContainsAny(vhost, "\n\r\x00") {
		return "", fmt.Errorf("broker-user: vhost %q", vhost)
	}
	return brokerUserRecipe(host, user, vhost), nil
}
