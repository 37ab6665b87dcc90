package gateway

import (
	"crypto/hpke"
	"fmt"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/keys"
)

// sealKeys adapts keys.SealKeys to bridge.Sealer.
type sealKeys struct{ s *keys.SealKeys }

func (k sealKeys) CurrentSealKey() (string, []byte) {
	c := k.s.Current()
	return c.ID(), c.Public()
}

func (k sealKeys) Private(id string) (hpke.PrivateKey, bool) { return k.s.Private(id) }

// sealMode is --seal's (Config.Seal), else the configuration file's, else
// auto.
func (g *Gateway) sealMode() (string, error) {
	mode := g.cfg.Seal
	if mode == "" {
		mode = g.cfg.File.Seal
	}
	switch mode {
	case "":
		return bridge.SealAuto, nil
	case bridge.SealAuto, bridge.SealRequire, bridge.SealOff:
		return mode, nil
	}
	return "", fmt.Errorf("gateway: seal %q: want auto, require or off", mode)
}

// setupSeal loads (or creates, on first start) this host's HPKE keys and
// has cfg seal to the peers' and open with its own (issue 23). Run
// watches the key files, so `herdbridge keys rotate-seal` needs no restart.
func (g *Gateway) setupSeal(cfg *bridge.Config) error {
	mode, err := g.sealMode()
	if err != nil {
		return err
	}
	sk, err := keys.NewSealKeys(g.cfg.StateDir, g.cfg.Host, g.log)
	if err != nil {
		return fmt.Errorf("gateway: HPKE key: %w", err)
	}
	g.seals = sk
	cfg.Sealer, cfg.ParseSealPublic, cfg.Seal = sealKeys{sk}, keys.ParseSealPublic, mode
	return nil
}
