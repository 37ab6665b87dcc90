package gateway

import (
	"path/filepath"
	"strings"

	"github.com/herdbridge/herdbridge/bridge"
)

// History purge (`herdbridge history purge`): through the running gateway,
// which may hold the files open, or straight in the state dir when none
// runs.

// sockPurgeHistory is the admin socket's "history-purge": the history of
// the entity named name, or every one with name "".
func (g *Gateway) sockPurgeHistory(name string) Reply {
	name = localName(name)
	n, err := g.core.PurgeHistory(name)
	if err != nil {
		return Reply{Error: err.Error()}
	}
	return Reply{OK: true, Purged: n}
}

// PurgeHistory deletes the history of the entity named name on stateDir's
// gateway (every entity's with name "") and says how many files went.
func PurgeHistory(stateDir, name string) (int, error) {
	if !Answers(stateDir) {
		return bridge.PurgeHistoryFiles(filepath.Join(stateDir, historyDir), localName(name))
	}
	r, err := Ask(stateDir, Request{Op: "history-purge", Name: name})
	if err != nil {
		return 0, err
	}
	return r.Purged, nil
}

// localName is name without an @host: histories are of this host's entities.
func localName(name string) string {
	name = strings.TrimSpace(name)
	if i := strings.LastIndexByte(name, '@'); i >= 0 {
		return name[:i]
	}
	return name
}
