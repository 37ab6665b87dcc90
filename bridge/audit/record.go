package audit

import "time"

// Record is one line of the audit log: metadata only, never a body. Its
// JSON is the file format (and a trace's answer across hosts): a field
// renamed here makes every log on disk unreadable.
type Record struct {
	At        time.Time `json:"at"`
	Dir       string    `json:"dir"` // out: published by this gateway; in: arrived at it or handled here
	Hop       string    `json:"hop,omitempty"`
	Kind      string    `json:"kind,omitempty"`
	MsgID     string    `json:"msgId,omitempty"`
	TraceID   string    `json:"traceId,omitempty"`
	Corr      string    `json:"corr,omitempty"`
	From      string    `json:"from,omitempty"`
	To        string    `json:"to,omitempty"`
	Host      string    `json:"host,omitempty"`
	Key       string    `json:"key,omitempty"`
	Entity    string    `json:"entity,omitempty"`
	Verdict   string    `json:"verdict"` // published | spooled: … | publish failed: … | accepted | refused: <reason> | the hop's status
	LatencyMs float64   `json:"latencyMs,omitempty"`
}
