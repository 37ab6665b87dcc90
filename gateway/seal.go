package gateway

import (
	"crypto/hpke"
	"fmt"

	"github.com/herdbridge/herdbridge/bridge"
	"github.com/herdbridge/herdbridge/keys"
)

// sealKeys adapts keys.SealKeys (and the state dir's seal_peers) to
// bridge.Sealer.
type sealKeys struct {
	s   *keys.SealKeys
	dir string
}

func (k sealKeys) RememberPeer(host string, pub []byte) error {
	return keys.RememberSealPeer(k.dir, host, pub)
}

func (k sealKeys) RememberedPeers() map[string]bridge.SealPeer {
	m, err := keys.ReadSealPeers(k.dir)
	out := make(map[string]bridge.SealPeer, len(m))
	if err != nil {
		return out
	}
	for h, pub := range m {
		out[h] = bridge.SealPeer{ID: keys.SealKeyID(pub), Pub: pub}
	}
	return out
}

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
	cfg.Sealer, cfg.ParseSealPublic, cfg.Seal = sealKeys{sk, g.cfg.StateDir}, keys.ParseSealPublic, mode
	return nil
}

// SealReport is sealing as the running gateway does it (doctor).
type SealReport struct {
	Mode  string            `json:"mode"`  // auto | require | off
	KeyID string            `json:"keyId"` // this host's current HPKE key
	Keys  int               `json:"keys"`  // keys it opens with (current and retired within the window)
	Peers []bridge.SealView `json:"peers"` // per other host: sealed | clear | no key
	// BroadcastHosts is how many hosts a broadcast sent now is sealed
	// to, 0 with BroadcastWhy saying why it would go clear (or be refused).
	BroadcastHosts int    `json:"broadcastHosts"`
	BroadcastWhy   string `json:"broadcastWhy,omitempty"`
}

func (g *Gateway) sealReport() *SealReport {
	if g.seals == nil {
		return nil
	}
	var hosts []string
	for _, p := range g.core.Peers() {
		if p.WeTrust {
			hosts = append(hosts, p.Host)
		}
	}
	r := &SealReport{Mode: g.core.SealMode(), KeyID: g.seals.Current().ID(), Keys: len(g.seals.IDs()), Peers: g.core.SealStates(hosts)}
	r.BroadcastHosts, r.BroadcastWhy = g.core.BroadcastSeal()
	return r
}

// sealChecks: the mode and this host's key, per peer whether what goes
// to it is sealed, and whether a broadcast is (sealed once to every host
// that reads it, or clear when one of them cannot open it).
func (d *doctor) sealChecks(s *SealReport) {
	if s == nil {
		return
	}
	switch s.Mode {
	case bridge.SealOff:
		d.add("seal", CheckWarn, "off: bodies cross the broker in clear text (this host still opens sealed ones, key "+s.KeyID+")",
			`set "seal": "auto" in config.json`)
	default:
		d.add("seal", CheckOK, fmt.Sprintf("%s: bodies to hosts with a known HPKE key are sealed (%s); this host's key %s, %d key(s) kept to open with",
			s.Mode, bridge.SealScheme, s.KeyID, s.Keys), "")
		switch {
		case s.BroadcastWhy == "":
			d.add("seal broadcasts", CheckOK, fmt.Sprintf("sealed once to the %d host(s) that read them (%s, at most %d hosts)", s.BroadcastHosts, bridge.SealMultiScheme, bridge.MaxSealHosts), "")
		case s.Mode == bridge.SealRequire:
			d.add("seal broadcasts", CheckFail, "refused: "+s.BroadcastWhy+" (seal require)", "upgrade or start the hosts named, or send to each recipient")
		default:
			d.add("seal broadcasts", CheckWarn, "clear: "+s.BroadcastWhy+", so a broadcast crosses the broker in clear text", "upgrade or start the hosts named, or send to each recipient")
		}
	}
	for _, p := range s.Peers {
		name := "seal " + p.Host
		switch {
		case p.State == bridge.SealStateSealed:
			d.add(name, CheckOK, "sealed to its key "+p.KeyID, "")
		case p.State == bridge.SealStateClear:
			d.add(name, CheckWarn, "clear: its key "+p.KeyID+" is known, seal is off here", `set "seal": "auto"`)
		case s.Mode == bridge.SealRequire:
			d.add(name, CheckFail, "no key: its heartbeat published no HPKE key, so nothing is sent to it (seal require)", "upgrade the gateway of "+p.Host+", or check it is up")
		default:
			d.add(name, CheckWarn, "no key: its heartbeat published no HPKE key, so what goes to it is clear text", "upgrade the gateway of "+p.Host+`, or set "seal": "require" to refuse clear`)
		}
	}
}
