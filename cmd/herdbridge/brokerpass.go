package main

import (
	"github.com/spf13/pflag"

	"github.com/herdbridge/herdbridge/gateway"
)

// The broker password out of argv (gateway/brokerpass.go): the flag; the
// step that joins the password to each broker URL is
// gateway.JoinBrokerPassword.

// brokerPasswordFlag adds --broker-password-file to fs.
func brokerPasswordFlag(fs *pflag.FlagSet) *string {
	return fs.String("broker-password-file", "", "file holding the password of the user --broker names, as amqp[s]://USER@host/ "+
		"(mode 0600; default $"+gateway.BrokerPasswordFileEnv+"; or brokerPassword in a 0600 config file): a password in --broker shows in ps to every local user")
}
