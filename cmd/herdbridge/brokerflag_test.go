package main

import (
	"testing"

	"github.com/spf13/pflag"
)

// TestBrokerFlag: --broker repeats and takes comma lists; the first one
// given replaces $HERDBRIDGE_BROKER instead of adding to it.
func TestBrokerFlag(t *testing.T) {
	t.Setenv("HERDBRIDGE_BROKER", "amqp://env1,amqp://env2")
	parse := func(args ...string) string {
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		b := addBrokerFlag(fs, "broker")
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	if got := parse(); got != "amqp://env1,amqp://env2" {
		t.Fatalf("no flag: %q", got)
	}
	if got := parse("--broker", "amqp://a,amqp://b", "--broker", "amqp://c"); got != "amqp://a,amqp://b,amqp://c" {
		t.Fatalf("repeated: %q", got)
	}
}
