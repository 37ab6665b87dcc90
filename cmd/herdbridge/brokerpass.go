package main

import (
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/herdbridge/herdbridge/bridge/broker"
	"github.com/herdbridge/herdbridge/gateway"
)

// The broker password out of argv (gateway/brokerpass.go): the flag, and
// the step that joins the password to a broker URL. A step of its own, so
// it applies to each broker URL alike.

// brokerPasswordFlag adds --broker-password-file to fs.
func brokerPasswordFlag(fs *pflag.FlagSet) *string {
	return fs.String("broker-password-file", "", "file holding the password of the user --broker names, as amqp[s]://USER@host/ "+
		"(mode 0600; default $"+gateway.BrokerPasswordFileEnv+"; or brokerPassword in a 0600 config file): a password in --broker shows in ps to every local user")
}

// withBrokerPassword joins the password, when one is given (the flag,
// which $HERDBRIDGE_BROKER_PASSWORD_FILE sets like every flag's
// HERDBRIDGE_ variable, or the config's brokerPassword), to the user
// brokerURL names. With no broker URL there is nothing to join it to: the
// embedded transport needs none, and the password is not read.
func withBrokerPassword(brokerURL, passwordFile string, file gateway.FileConfig) (string, error) {
	if brokerURL == "" {
		return "", nil
	}
	pw, err := gateway.BrokerPassword(passwordFile, file)
	if err != nil || pw == "" {
		return brokerURL, err
	}
	urls := broker.ParseURLs(brokerURL) // a comma list of nodes: each takes the password
	for i, u := range urls {
		if urls[i], err = gateway.WithBrokerPassword(u, pw); err != nil {
			return "", err
		}
	}
	return strings.Join(urls, ","), nil
}

// stateConfig is the config file of the state dir (config.json, absent
// is fine), for the commands that read only its brokerPassword.
func stateConfig(dir, path string) (gateway.FileConfig, error) {
	if path == "" {
		return gateway.LoadFile(filepath.Join(dir, "config.json"), false)
	}
	return gateway.LoadFile(path, true)
}
