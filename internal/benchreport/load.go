package benchreport

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/herdbridge/herdbridge/loadtest"
)

// The load tool's report (`herdbridge loadtest --json`): one object, the
// contract between the tool and this report (issue 15, item 4). Its types
// are the tool's own, so a field the tool renames fails to compile here
// (cmd/herdbridge's TestLoadtestInProcess checks the JSON names).
type (
	Load        = loadtest.ToolReport
	LoadTotals  = loadtest.ToolTotals
	LoadKind    = loadtest.ToolKind
	LoadGateway = loadtest.ToolGateway
)

// ParseLoad reads the load tool's one JSON object. Fields it does not know
// are ignored (the tool may say more); an object with no kinds is refused,
// since every load figure is read from one.
func ParseLoad(r io.Reader) (*Load, error) {
	var l Load
	dec := json.NewDecoder(io.LimitReader(r, 1<<20))
	if err := dec.Decode(&l); err != nil {
		return nil, fmt.Errorf("benchreport: the load tool's JSON: %w", err)
	}
	if len(l.Kinds) == 0 {
		return nil, errors.New("benchreport: the load tool's JSON has no kinds: was it run with --json?")
	}
	return &l, nil
}

// loadKind is the named kind's figures.
func loadKind(l *Load, kind string) (LoadKind, bool) {
	for _, k := range l.Kinds {
		if k.Kind == kind {
			return k, true
		}
	}
	return LoadKind{}, false
}
