package benchreport

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Load is what `herdbridge loadtest --json` prints: one object, the shared
// contract between the load tool and this report (issue 15, item 4).
type Load struct {
	Target          string         `json:"target"`
	Primaries       int            `json:"primaries"`
	Workers         int            `json:"workers"`
	Registered      int            `json:"registered"`
	Transports      map[string]int `json:"transports"`
	DurationSeconds float64        `json:"durationSeconds"`
	Totals          LoadTotals     `json:"totals"`
	Kinds           []LoadKind     `json:"kinds"`
	Gateway         LoadGateway    `json:"gateway"`
}

// LoadTotals count every call and every owed copy of the run.
type LoadTotals struct {
	Calls     int     `json:"calls"`
	Errors    int     `json:"errors"`
	Accepted  int     `json:"accepted"`
	Owed      int     `json:"owed"`
	Delivered int     `json:"delivered"`
	Lost      int     `json:"lost"`
	PerSecond float64 `json:"perSecond"`
}

// LoadKind is one kind of call: brief, pane-brief, reply, ask, answer,
// broadcast, poll, or roster (delivery fields 0).
type LoadKind struct {
	Kind          string  `json:"kind"`
	Calls         int     `json:"calls"`
	Errors        int     `json:"errors"`
	PerSecond     float64 `json:"perSecond"`
	CallP50Ms     float64 `json:"callP50Ms"`
	CallP90Ms     float64 `json:"callP90Ms"`
	CallP99Ms     float64 `json:"callP99Ms"`
	DeliveryP50Ms float64 `json:"deliveryP50Ms"`
	DeliveryP90Ms float64 `json:"deliveryP90Ms"`
	DeliveryP99Ms float64 `json:"deliveryP99Ms"`
}

// LoadGateway is the gateway process's cost over the run.
type LoadGateway struct {
	RSSBytes   int64   `json:"rssBytes"`
	CPUSeconds float64 `json:"cpuSeconds"`
	Goroutines int     `json:"goroutines"`
}

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

// Kind is the named kind's figures.
func (l *Load) Kind(kind string) (LoadKind, bool) {
	for _, k := range l.Kinds {
		if k.Kind == kind {
			return k, true
		}
	}
	return LoadKind{}, false
}
