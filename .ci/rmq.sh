# rmq.sh — source from bash. Throwaway, loopback-only RabbitMQ 3.10 node (Debian package), no systemd,
# for the tests and CI. Sourcing it defines functions only; rmq_start exports the node's RABBITMQ_*/ERL_*
# variables and RMQ_*, never HOME: the Erlang cookie lives in $RMQ_DIR, and only the processes this
# script starts (and rmq_ctl) run with HOME=$RMQ_DIR. To run rabbitmqctl yourself: rmq_ctl, or
# HOME=$RMQ_DIR /usr/lib/rabbitmq/bin/rabbitmqctl.
#   rmq_start [amqp_port]   -> exports RMQ_URL, RMQ_DIR, RMQ_PID (sh wrapper), RMQ_BEAM_PID, RMQ_EPMD_PID
#   rmq_ctl <cmd...>        -> rabbitmqctl against that node (stop_app, start_app, list_queues, ...)
#   rmq_crash_restart       -> SIGKILL the VM and restart it on the same data dir (fault tests)
#   rmq_restart             -> start a killed VM again on the same data dir
#   rmq_stop                -> graceful stop (SIGTERM), kill epmd by PID, delete the temp dir
# CI:  . rmq.sh; rmq_start 5679 || exit 1; trap rmq_stop EXIT; RMQ_URL=$RMQ_URL go test ./...
RMQ_BIN=/usr/lib/rabbitmq/bin   # NOT /usr/sbin/*: as root those wrappers `su rabbitmq` (other HOME, other cookie)
rmq_port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
rmq_env() {
  local port=$1
  export RABBITMQ_NODENAME=rmqtest$port@localhost # @localhost: no dependency on `hostname` resolving
  export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1       # AMQP listener on loopback only
  export RABBITMQ_NODE_PORT=$port
  export RABBITMQ_DIST_PORT=$((port + 20000))     # Erlang distribution listener (loopback via the -kernel arg below)
  export ERL_EPMD_ADDRESS=127.0.0.1               # epmd on loopback only (it adds ::1 by itself)
  export ERL_EPMD_PORT=$((port - 1000))           # private epmd: never shares/starts the system-wide one on 4369
  export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
  export RABBITMQ_CTL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
  export RABBITMQ_MNESIA_BASE=$RMQ_DIR/mnesia
  export RABBITMQ_LOG_BASE=$RMQ_DIR/log
  export RABBITMQ_PID_FILE=$RMQ_DIR/rabbit.pid
  export RABBITMQ_ENABLED_PLUGINS_FILE=$RMQ_DIR/enabled_plugins
  export RABBITMQ_CONF_ENV_FILE=$RMQ_DIR/rabbitmq-env.conf   # absent on purpose: ignore /etc/rabbitmq/rabbitmq-env.conf
  export RABBITMQ_CONFIG_FILE=$RMQ_DIR/rabbitmq.conf
}
rmq_start() {
  local port=${1:-5679} i
  for p in "$port" "$((port + 20000))" "$((port - 1000))"; do
    rmq_port_busy "$p" && { echo "rmq_start: 127.0.0.1:$p already in use" >&2; return 1; }
  done
  RMQ_DIR=$(mktemp -d -t rmq.XXXXXX); export RMQ_DIR
  rmq_env "$port"
  mkdir -p "$RABBITMQ_LOG_BASE"
  echo '[].' > "$RABBITMQ_ENABLED_PLUGINS_FILE"            # no plugins (management etc. off)
  printf '%s\n' "${RMQ_CONF:-}" > "$RABBITMQ_CONFIG_FILE"  # optional rabbitmq.conf lines
  epmd -address 127.0.0.1 -port "$ERL_EPMD_PORT" > "$RMQ_DIR/epmd.log" 2>&1 &   # foreground mode: we own the PID
  RMQ_EPMD_PID=$!
  for i in $(seq 50); do epmd -port "$ERL_EPMD_PORT" -names >/dev/null 2>&1 && break; sleep 0.05; done
  : > "$RMQ_DIR/stdout.log"
  rmq_server
  export RMQ_EPMD_PID RMQ_URL="amqp://guest:guest@127.0.0.1:$port/"
  rmq_wait_port || { rmq_stop; return 1; }                 # ready == AMQP port accepts (listener starts last)
}
# The node and its CLI find .erlang.cookie in HOME: give them $RMQ_DIR as HOME, in their own
# environment only (a prefix assignment), so the caller's HOME never changes.
rmq_server() {                                              # internal: start the VM (wrapper PID in RMQ_PID)
  HOME=$RMQ_DIR "$RMQ_BIN/rabbitmq-server" >> "$RMQ_DIR/stdout.log" 2>&1 &
  RMQ_PID=$!; export RMQ_PID
}
rmq_ctl() { HOME=$RMQ_DIR "$RMQ_BIN/rabbitmqctl" -q "$@"; }
rmq_wait_port() {                                           # internal: poll until the AMQP port accepts
  local i
  for i in $(seq 600); do
    rmq_port_busy "$RABBITMQ_NODE_PORT" && { RMQ_BEAM_PID=$(pgrep -P "$RMQ_PID" beam.smp); export RMQ_BEAM_PID; return 0; }
    kill -0 "$RMQ_PID" 2>/dev/null || { echo "rabbitmq died, see $RMQ_DIR" >&2; tail -20 "$RMQ_DIR/stdout.log" >&2; return 1; }
    sleep 0.1
  done
  echo "rabbitmq start timeout" >&2; return 1
}
rmq_crash_restart() {                                       # fault test: SIGKILL the VM, restart on the same data dir
  local i
  kill -KILL "$RMQ_BEAM_PID"; wait "$RMQ_PID" 2>/dev/null
  for i in $(seq 100); do kill -0 "$RMQ_PID" 2>/dev/null || break; sleep 0.05; done
  rmq_restart
}
rmq_restart() { rmq_server; rmq_wait_port; }               # start a killed VM again on the same data dir
rmq_stop() {
  local i
  kill -TERM "$RMQ_PID" 2>/dev/null                         # wrapper forwards TERM -> graceful stop (~1 s)
  for i in $(seq 150); do kill -0 "$RMQ_PID" 2>/dev/null || break; sleep 0.1; done
  [ -n "$RMQ_BEAM_PID" ] && kill -0 "$RMQ_BEAM_PID" 2>/dev/null && kill -KILL "$RMQ_BEAM_PID"
  wait "$RMQ_PID" 2>/dev/null
  kill "$RMQ_EPMD_PID" 2>/dev/null; wait "$RMQ_EPMD_PID" 2>/dev/null
  [ -n "${RMQ_KEEP:-}" ] || rm -rf "$RMQ_DIR"
}

# ---- a 3-node cluster on one machine (issue 22), beside the single node above ---------------------
#   rmq_cluster_start BASEPORT -> nodes 1..3: AMQP BASEPORT..BASEPORT+2, distribution BASEPORT+20000..,
#                                 one private epmd on BASEPORT-1000, one cookie; nodes 2 and 3 join_cluster
#                                 node 1; returns once cluster_status shows 3 running nodes. Exports
#                                 RMQ_CLUSTER_URLS (comma list), RMQ_CLUSTER_DIR, RMQ_CLUSTER_NODES (names).
#   rmq_cluster_ctl N <cmd...> -> rabbitmqctl against node N
#   rmq_cluster_kill N         -> SIGKILL node N's VM (no graceful anything)
#   rmq_cluster_restart N      -> stop node N gracefully if it runs, start it again, wait until it is back in
#   rmq_cluster_partition N    -> cut node N's distribution links to the other two (nftables), AMQP untouched
#   rmq_cluster_heal           -> remove the cut
#   rmq_cluster_stop           -> stop all three, epmd, the cut; delete the dir
# All state lives in files under $RMQ_CLUSTER_DIR, so a test process can run the functions through
# `bash -c '. .ci/rmq.sh; rmq_cluster_kill 2'` with RMQ_CLUSTER_DIR in its environment. The node variables
# are set in subshells only: the single node's RABBITMQ_* exports stay as rmq_start left them.
# Each node's outgoing distribution connections leave from its own loopback address (127.0.1.N, kernel
# inet_dist_connect_options) so a partition is two nftables rules per link on loopback: no namespaces, no
# proxy in the data path of the healthy nodes. pause_minority: what the README recommends; net_ticktime
# 10 s (default 60) so a cut node notices within ~10-13 s and a partition test ends in CI time.
RMQ_CLUSTER_TICKTIME=${RMQ_CLUSTER_TICKTIME:-10}
rmq_cluster_base() { cat "$RMQ_CLUSTER_DIR/base"; }
rmq_cluster_name() { echo "rmqc$(rmq_cluster_base)n$1@localhost"; }
rmq_cluster_env() {                                         # internal, in a subshell: node N's environment
  local n=$1 base d ip
  base=$(rmq_cluster_base); d=$RMQ_CLUSTER_DIR/n$n; ip="{127,0,1,$n}"
  export RABBITMQ_NODENAME; RABBITMQ_NODENAME=$(rmq_cluster_name "$n")
  export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT=$((base + n - 1))
  export RABBITMQ_DIST_PORT=$((base + 20000 + n - 1)) ERL_EPMD_ADDRESS=127.0.0.1 ERL_EPMD_PORT=$((base - 1000))
  export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1} -kernel inet_dist_connect_options [{ip,$ip}] -kernel net_ticktime $RMQ_CLUSTER_TICKTIME"
  export RABBITMQ_CTL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1} -kernel net_ticktime $RMQ_CLUSTER_TICKTIME"
  export RABBITMQ_MNESIA_BASE=$d/mnesia RABBITMQ_LOG_BASE=$d/log RABBITMQ_PID_FILE=$d/rabbit.pid
  export RABBITMQ_ENABLED_PLUGINS_FILE=$d/enabled_plugins RABBITMQ_CONF_ENV_FILE=$d/rabbitmq-env.conf
  export RABBITMQ_CONFIG_FILE=$d/rabbitmq.conf HOME=$RMQ_CLUSTER_DIR   # the one cookie: $RMQ_CLUSTER_DIR/.erlang.cookie
}
rmq_cluster_ctl() { local n=$1; shift; ( rmq_cluster_env "$n"; "$RMQ_BIN/rabbitmqctl" -q "$@" ); }
rmq_cluster_server() {                                      # internal: start node N's VM, detached (own session)
  local n=$1
  ( rmq_cluster_env "$n"; rm -f "$RABBITMQ_PID_FILE"
    setsid "$RMQ_BIN/rabbitmq-server" >> "$RMQ_CLUSTER_DIR/n$n/stdout.log" 2>&1 < /dev/null &
    echo $! > "$RMQ_CLUSTER_DIR/n$n/wrapper.pid" )
}
rmq_cluster_wait() {                                        # internal: node N's AMQP port accepts and its app runs
  local n=$1 port i
  port=$(( $(rmq_cluster_base) + n - 1 ))
  for i in $(seq 900); do
    rmq_port_busy "$port" && { rmq_cluster_ctl "$n" await_startup --timeout 60 && return 0; }
    kill -0 "$(cat "$RMQ_CLUSTER_DIR/n$n/wrapper.pid")" 2>/dev/null || {
      echo "rabbitmq node $n died, see $RMQ_CLUSTER_DIR/n$n" >&2; tail -20 "$RMQ_CLUSTER_DIR/n$n/stdout.log" >&2; return 1; }
    sleep 0.1
  done
  echo "rabbitmq node $n start timeout" >&2; return 1
}
rmq_cluster_running() {                                     # how many nodes node N's cluster_status lists as running
  rmq_cluster_ctl "$1" cluster_status --formatter json 2>/dev/null |
    sed -n 's/.*"running_nodes":\[\([^]]*\)\].*/\1/p' | tr ',' '\n' | grep -c rmqc
}
rmq_cluster_start() {
  local base=${1:-5711} n p
  for p in $((base - 1000)) $base $((base + 1)) $((base + 2)) $((base + 20000)) $((base + 20001)) $((base + 20002)); do
    rmq_port_busy "$p" && { echo "rmq_cluster_start: 127.0.0.1:$p already in use" >&2; return 1; }
  done
  RMQ_CLUSTER_DIR=$(mktemp -d -t rmqc.XXXXXX); export RMQ_CLUSTER_DIR
  echo "$base" > "$RMQ_CLUSTER_DIR/base"
  head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$RMQ_CLUSTER_DIR/.erlang.cookie"
  chmod 400 "$RMQ_CLUSTER_DIR/.erlang.cookie"
  for n in 1 2 3; do
    mkdir -p "$RMQ_CLUSTER_DIR/n$n/log"; echo '[].' > "$RMQ_CLUSTER_DIR/n$n/enabled_plugins"
    printf '%s\n' "cluster_partition_handling = pause_minority" "${RMQ_CONF:-}" > "$RMQ_CLUSTER_DIR/n$n/rabbitmq.conf"
  done
  epmd -address 127.0.0.1 -port $((base - 1000)) > "$RMQ_CLUSTER_DIR/epmd.log" 2>&1 &   # foreground mode: we own the PID
  echo $! > "$RMQ_CLUSTER_DIR/epmd.pid"
  for n in 1 2 3; do rmq_cluster_server "$n"; done           # boot in parallel: the joins below are what is serial
  for n in 1 2 3; do rmq_cluster_wait "$n" || { rmq_cluster_stop; return 1; }; done
  for n in 2 3; do
    { rmq_cluster_ctl "$n" stop_app && rmq_cluster_ctl "$n" join_cluster "$(rmq_cluster_name 1)" &&
      rmq_cluster_ctl "$n" start_app; } || { echo "node $n could not join node 1" >&2; rmq_cluster_stop; return 1; }
  done
  rmq_cluster_ctl 1 await_online_nodes 3 --timeout 120 && [ "$(rmq_cluster_running 1)" = 3 ] ||
    { echo "cluster_status does not show 3 running nodes" >&2; rmq_cluster_ctl 1 cluster_status >&2; rmq_cluster_stop; return 1; }
  rmq_cluster_exports
}
rmq_cluster_exports() {
  local base; base=$(rmq_cluster_base)
  export RMQ_CLUSTER_URLS="amqp://guest:guest@127.0.0.1:$base/,amqp://guest:guest@127.0.0.1:$((base + 1))/,amqp://guest:guest@127.0.0.1:$((base + 2))/"
  export RMQ_CLUSTER_NODES; RMQ_CLUSTER_NODES="$(rmq_cluster_name 1),$(rmq_cluster_name 2),$(rmq_cluster_name 3)"
}
rmq_cluster_kill() {
  local n=$1 i beam wrapper
  beam=$(cat "$RMQ_CLUSTER_DIR/n$n/rabbit.pid" 2>/dev/null); wrapper=$(cat "$RMQ_CLUSTER_DIR/n$n/wrapper.pid")
  [ -n "$beam" ] && kill -KILL "$beam" 2>/dev/null
  for i in $(seq 100); do kill -0 "$wrapper" 2>/dev/null || return 0; sleep 0.05; done
  kill -KILL "$wrapper" 2>/dev/null; return 0
}
rmq_cluster_halt() {                                        # internal: graceful stop of node N (TERM to the wrapper)
  local n=$1 i beam wrapper
  beam=$(cat "$RMQ_CLUSTER_DIR/n$n/rabbit.pid" 2>/dev/null); wrapper=$(cat "$RMQ_CLUSTER_DIR/n$n/wrapper.pid" 2>/dev/null)
  [ -n "$wrapper" ] && kill -TERM "$wrapper" 2>/dev/null
  for i in $(seq 300); do kill -0 "$wrapper" 2>/dev/null || break; sleep 0.1; done
  [ -n "$beam" ] && kill -0 "$beam" 2>/dev/null && kill -KILL "$beam"
  return 0
}
rmq_cluster_restart() { rmq_cluster_halt "$1"; rmq_cluster_server "$1"; rmq_cluster_wait "$1"; }
rmq_cluster_table() { echo "rmq_cluster_$(rmq_cluster_base)"; }
rmq_cluster_partition() {
  local n=$1 base t m
  base=$(rmq_cluster_base); t=$(rmq_cluster_table)
  nft add table inet "$t" && nft add chain inet "$t" out '{ type filter hook output priority 0; policy accept; }' || return 1
  for m in 1 2 3; do
    [ "$m" = "$n" ] && continue
    # m's connections to n's listener and n's to m's, both directions of each
    nft add rule inet "$t" out ip saddr "127.0.1.$m" tcp dport $((base + 20000 + n - 1)) drop
    nft add rule inet "$t" out ip daddr "127.0.1.$m" tcp sport $((base + 20000 + n - 1)) drop
    nft add rule inet "$t" out ip saddr "127.0.1.$n" tcp dport $((base + 20000 + m - 1)) drop
    nft add rule inet "$t" out ip daddr "127.0.1.$n" tcp sport $((base + 20000 + m - 1)) drop
  done
}
rmq_cluster_heal() { nft delete table inet "$(rmq_cluster_table)" 2>/dev/null; return 0; }
rmq_cluster_stop() {
  local n pids=
  [ -n "${RMQ_CLUSTER_DIR:-}" ] && [ -d "$RMQ_CLUSTER_DIR" ] || return 0
  command -v nft >/dev/null && rmq_cluster_heal
  for n in 3 2 1; do rmq_cluster_halt "$n" & pids="$pids $!"; done
  wait $pids                                                # not a bare wait: epmd may be this shell's job too
  kill "$(cat "$RMQ_CLUSTER_DIR/epmd.pid")" 2>/dev/null
  [ -n "${RMQ_KEEP:-}" ] || rm -rf "$RMQ_CLUSTER_DIR"
}
# A node paused by pause_minority resumes by itself once healed (~2 s here), but 3.10.8 on Erlang 25 was
# seen to stay stuck in its boot after the pause (mnesia up, rabbit never started) for minutes: a node
# whose AMQP port is still closed RMQ_CLUSTER_RESUME seconds after the heal is restarted.
rmq_cluster_repair() {                                      # heal any cut, start every node that is down, wait for 3 running
  local n port i
  command -v nft >/dev/null && rmq_cluster_heal
  for n in 1 2 3; do
    port=$(( $(rmq_cluster_base) + n - 1 ))
    rmq_port_busy "$port" && continue
    if kill -0 "$(cat "$RMQ_CLUSTER_DIR/n$n/wrapper.pid")" 2>/dev/null; then   # alive: paused, or booting
      for i in $(seq $((${RMQ_CLUSTER_RESUME:-30} * 10))); do rmq_port_busy "$port" && break; sleep 0.1; done
      rmq_port_busy "$port" || { echo "node $n did not resume: restarting it" >&2; rmq_cluster_kill "$n"; rmq_cluster_server "$n"; }
    else
      rmq_cluster_server "$n"
    fi
  done
  for n in 1 2 3; do rmq_cluster_wait "$n" || return 1; done
  rmq_cluster_ctl 1 await_online_nodes 3 --timeout 120 >/dev/null && [ "$(rmq_cluster_running 1)" = 3 ]
}
