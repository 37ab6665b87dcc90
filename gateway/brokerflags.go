package gateway

import (
	"path/filepath"
	"strings"

	"github.com/herdbridge/herdbridge/bridge/broker"
)

// The steps a command takes from its flags to the broker URL it dials: the
// state dir's config file, the file's broker nodes when no --broker was
// given, the password joined to each node's user.

// StateConfig is the config file a command reads: path when given (then
// it must exist), else config.json in the state dir (absent is fine).
func StateConfig(dir, path string) (FileConfig, error) {
	if path == "" {
		return LoadFile(filepath.Join(dir, "config.json"), false)
	}
	return LoadFile(path, true)
}

// ConfigBroker is the gateway's broker: brokerURL (--broker, a comma list
// of nodes), else the config file's broker and brokers; with the password
// joined (JoinBrokerPassword) — the file's nodes take it too.
func ConfigBroker(brokerURL, passwordFile string, file FileConfig) (string, error) {
	if brokerURL == "" {
		brokerURL = strings.Join(broker.ParseURLs(append([]string{file.Broker}, file.Brokers...)...), ",")
	}
	return JoinBrokerPassword(brokerURL, passwordFile, file)
}

// JoinBrokerPassword joins the password, when one is given (the flag,
// which $HERDBRIDGE_BROKER_PASSWORD_FILE sets like every flag's
// HERDBRIDGE_ variable, or the config's brokerPassword), to the user each
// node of brokerURL (a comma list) names. With no broker URL there is
// nothing to join it to: the embedded transport needs none, and the
// password is not read.
func JoinBrokerPassword(brokerURL, passwordFile string, file FileConfig) (string, error) {
	if brokerURL == "" {
		return "", nil
	}
	pw, err := BrokerPassword(passwordFile, file)
	if err != nil || pw == "" {
		return brokerURL, err
	}
	urls := broker.ParseURLs(brokerURL) // a comma list of nodes: each takes the password
	for i, u := range urls {
		if urls[i], err = WithBrokerPassword(u, pw); err != nil {
			return "", err
		}
	}
	return strings.Join(urls, ","), nil
}
