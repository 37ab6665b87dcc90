package gateway

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/herdbridge/herdbridge/bridge/broker"
)

// QueueTypeName is the file in the state dir that remembers the queue
// type this gateway's broker queues have: a restart while a broker node
// is down must not flip auto's choice (README "Queue types").
const QueueTypeName = "queue-type.json"

// queueTypeProbeWait bounds auto's probe of the broker nodes.
const queueTypeProbeWait = 3 * time.Second

// configuredQueueType is --queue-type ($HERDBRIDGE_QUEUE_TYPE), else the
// configuration file's queueType.
func (g *Gateway) configuredQueueType() (string, error) {
	s := g.cfg.QueueType
	if s == "" {
		s = g.cfg.File.QueueType
	}
	qt, err := broker.ParseQueueType(s)
	if err != nil {
		return "", fmt.Errorf("gateway: --queue-type: %w", err)
	}
	return qt, nil
}

// chooseQueueType decides the queue type before the transport opens:
// the broker nodes are probed only when auto has nothing remembered and
// enough URIs to consider quorum.
func (g *Gateway) chooseQueueType(ctx context.Context, tlsConf *tls.Config) (broker.QueueTypeChoice, error) {
	configured, err := g.configuredQueueType()
	if err != nil {
		return broker.QueueTypeChoice{}, err
	}
	remembered := g.rememberedQueueType()
	urls := broker.ParseURLs(g.cfg.Broker)
	var answers []broker.NodeAnswer
	if configured == broker.QueueTypeAuto && remembered.Type == "" && len(urls) >= 3 {
		pctx, cancel := context.WithTimeout(ctx, queueTypeProbeWait)
		answers = broker.ProbeNodes(pctx, urls, tlsConf)
		cancel()
	}
	choice := broker.DecideQueueType(configured, remembered.Type, urls, answers)
	if remembered.Type != "" && choice.Type == remembered.Type && configured == broker.QueueTypeAuto {
		choice.Why = remembered.Why + " (remembered in " + QueueTypeName + ")"
	}
	return choice, nil
}

// rememberedQueueType reads the state dir's memory; none (or unreadable)
// is the zero choice.
func (g *Gateway) rememberedQueueType() broker.QueueTypeChoice {
	var c broker.QueueTypeChoice
	b, err := os.ReadFile(filepath.Join(g.cfg.StateDir, QueueTypeName))
	if err != nil {
		return c
	}
	if json.Unmarshal(b, &c) != nil {
		g.log.Warn("the remembered queue type is unreadable: deciding again", "file", QueueTypeName)
		return broker.QueueTypeChoice{}
	}
	return c
}

// rememberQueueType writes the type the transport uses (LavinMQ may have
// turned a quorum into classic) and why.
func (g *Gateway) rememberQueueType(c broker.QueueTypeChoice) {
	if prev := g.rememberedQueueType(); prev.Type == c.Type {
		return
	}
	b, _ := json.Marshal(c)
	path := filepath.Join(g.cfg.StateDir, QueueTypeName)
	if err := os.WriteFile(path+".tmp", append(b, '\n'), 0o600); err == nil {
		err = os.Rename(path+".tmp", path)
		if err == nil {
			return
		}
	}
	g.log.Warn("the queue type could not be remembered: a restart decides it again", "file", QueueTypeName)
}
