package main

import (
	"fmt"
	"io"
	"time"

	"github.com/herdbridge/herdbridge/keys"
)

// keysRotateSeal replaces this host's HPKE key. Nothing to do on the other
// hosts: the running gateway here reloads it and its signed heartbeat
// publishes the new key; what was sealed to the old one still opens here
// for keys.SealRetention.
func keysRotateSeal(dir, host string, stdout io.Writer) error {
	old, _, err := keys.LoadOrCreateSealKey(dir, host)
	if err != nil {
		return err
	}
	nk, err := keys.RotateSealKey(dir, host, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "rotated the HPKE key in %s: %s → %s\n", dir, old.ID(), nk.ID())
	fmt.Fprintf(stdout, "the old key stays in retired_keys/ for %s, so messages sealed to it still open here\n", keys.SealRetention)
	fmt.Fprintf(stdout, "a running gateway picks the new key up within seconds and publishes it in its heartbeat: nothing to do on the other hosts\n")
	return nil
}
