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
