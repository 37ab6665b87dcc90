package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestRmqScriptKeepsHome: sourcing .ci/rmq.sh (as README's Tests section
// says to) and setting up a node's environment never changes the caller's
// HOME; only the processes the script starts see HOME=$RMQ_DIR.
func TestRmqScriptKeepsHome(t *testing.T) {
	script := `set -eu
HOME=/home/someone
. ../../.ci/rmq.sh
[ "$HOME" = /home/someone ] || { echo "sourcing changed HOME to $HOME"; exit 1; }
RMQ_DIR=/tmp/nonexistent-rmq rmq_env 5679
[ "$HOME" = /home/someone ] || { echo "rmq_env changed HOME to $HOME"; exit 1; }
[ "$RABBITMQ_NODENAME" = rmqtest5679@localhost ] || { echo "node name $RABBITMQ_NODENAME"; exit 1; }
type rmq_ctl | grep -q 'HOME=$RMQ_DIR' || { echo "rmq_ctl does not give rabbitmqctl the node's HOME"; exit 1; }
echo ok`
	out, err := exec.Command("bash", "--norc", "--noprofile", "-c", script).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("%v: %s", err, out)
	}
}

// TestRmqClusterScriptKeepsEnv: the cluster functions set each node's
// variables in a subshell only, so the single node's RABBITMQ_* exports
// (and HOME) stay as rmq_start left them when .ci/run starts both; node
// N's names and ports follow from the base port.
func TestRmqClusterScriptKeepsEnv(t *testing.T) {
	script := `set -eu
HOME=/home/someone RABBITMQ_NODENAME=rmqtest5679@localhost ERL_EPMD_PORT=4679
. ../../.ci/rmq.sh
RMQ_CLUSTER_DIR=$(mktemp -d); trap 'rm -rf "$RMQ_CLUSTER_DIR"' EXIT; echo 5711 > "$RMQ_CLUSTER_DIR/base"
got=$( rmq_cluster_env 2; echo "$RABBITMQ_NODENAME $RABBITMQ_NODE_PORT $RABBITMQ_DIST_PORT $ERL_EPMD_PORT $HOME" )
[ "$got" = "rmqc5711n2@localhost 5712 25712 4711 $RMQ_CLUSTER_DIR" ] || { echo "node 2's environment: $got"; exit 1; }
( rmq_cluster_env 3; echo "$RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS" ) | grep -q 'inet_dist_connect_options \[{ip,{127,0,1,3}}\]' ||
  { echo "node 3 does not dial from 127.0.1.3"; exit 1; }
[ "$RABBITMQ_NODENAME $ERL_EPMD_PORT $HOME" = "rmqtest5679@localhost 4679 /home/someone" ] ||
  { echo "the caller's environment changed: $RABBITMQ_NODENAME $ERL_EPMD_PORT $HOME"; exit 1; }
rmq_cluster_exports
[ "$RMQ_CLUSTER_URLS" = "amqp://guest:guest@127.0.0.1:5711/,amqp://guest:guest@127.0.0.1:5712/,amqp://guest:guest@127.0.0.1:5713/" ] ||
  { echo "RMQ_CLUSTER_URLS=$RMQ_CLUSTER_URLS"; exit 1; }
echo ok`
	out, err := exec.Command("bash", "--norc", "--noprofile", "-c", script).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("%v: %s", err, out)
	}
}
