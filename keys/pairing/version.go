package pairing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Pairing protocol versions. Hosts of different versions derive different
// keys from the same code, so without a version check they would fail as
// a wrong code; instead each side names the version it met.

// ErrVersion: the other host runs another version of the pairing
// protocol.
var ErrVersion = errors.New("pairing: the other host speaks another pairing version")

// versionNames says what each version is, for the sentence of ErrVersion.
var versionNames = map[int]string{
	1: "herdbridge's CPace before draft-irtf-cfrg-cpace-21",
	2: "CPace as draft-irtf-cfrg-cpace-21",
}

func versionName(v int) string {
	if n, ok := versionNames[v]; ok {
		return n
	}
	return "unknown to this herdbridge"
}

// versionErr is the refusal of a message of version v.
func versionErr(v int) error {
	return fmt.Errorf("%w: its message is pairing version %d (%s), this herdbridge speaks version %d (%s): run the same herdbridge release on both hosts",
		ErrVersion, v, versionName(v), version, versionName(version))
}

// peekSession reads the session id of a message that may be of another
// version, leniently: only what every version has.
func peekSession(raw []byte) ([]byte, bool) {
	var w struct {
		SID []byte `json:"sid"`
	}
	if len(raw) > MaxMessage || json.Unmarshal(raw, &w) != nil || len(w.SID) != sidLen {
		return nil, false
	}
	return w.SID, true
}

// answerVersion tells a joiner of another version, on its own address, that
// this initiator speaks another: an abort of this version, which a joiner
// of pairing v1 refuses at once with "message version 2; this herdbridge
// speaks 1 (run the same release on both hosts)" instead of waiting out
// its step and blaming the code.
func (o *Offer) answerVersion(ctx context.Context, raw []byte) {
	sid, ok := peekSession(raw)
	if !ok {
		return
	}
	abort := &Message{Type: TypeAbort, SID: sid}
	if err := o.room.Send(ctx, joinerAddr(o.code, sid), abort.Marshal(), o.opts.StepWait); err != nil {
		o.opts.Log.Warn("telling a joiner of another pairing version failed", logErr, err)
	}
}
