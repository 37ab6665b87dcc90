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
