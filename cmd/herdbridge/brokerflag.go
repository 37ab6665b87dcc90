package main

import (
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// brokerFlag is --broker: one amqp[s]:// URI or a comma list of a
// cluster's nodes, the flag repeatable (each adds nodes). Its default is
// $HERDBRIDGE_BROKER (a comma list too), replaced — not extended — by the
// first --broker given.
type brokerFlag struct {
	list []string
	set  bool
}

// addBrokerFlag registers --broker on fs; the value is the comma list.
func addBrokerFlag(fs *pflag.FlagSet, usage string) *brokerFlag {
	b := &brokerFlag{}
	if env := os.Getenv("HERDBRIDGE_BROKER"); env != "" {
		b.list = []string{env}
	}
	fs.Var(b, "broker", usage+"; several nodes: a comma list or the flag repeated")
	return b
}

func (b *brokerFlag) String() string {
	if b == nil {
		return ""
	}
	return strings.Join(b.list, ",")
}

func (b *brokerFlag) Set(v string) error {
	if !b.set {
		b.list, b.set = nil, true
	}
	b.list = append(b.list, v)
	return nil
}

func (b *brokerFlag) Type() string { return "url" }
