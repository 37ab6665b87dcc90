package gateway

// `herdbridge pair` as a person sees it: the code to pass on, the wait,
// and whom this host now trusts, as sentences or JSON lines.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/herdbridge/herdbridge/keys"
	"github.com/herdbridge/herdbridge/keys/pairing"
)

// PairOutput prints the pairing's progress as text or JSON lines.
type PairOutput struct {
	W    io.Writer
	JSON bool // JSON lines instead of sentences
}

func (o PairOutput) line(v map[string]any, text string) {
	if o.JSON {
		b, _ := json.Marshal(v)
		fmt.Fprintf(o.W, "%s\n", b)
		return
	}
	fmt.Fprintln(o.W, text)
}

func (o PairOutput) paired(p *Pairing, r pairing.Result) {
	fp := keys.Fingerprint(r.PeerKey)
	text := fmt.Sprintf("paired with %s (%s): it is trusted in %s; a running gateway picks it up within a few seconds", r.Peer, fp, p.TrustFile())
	if r.Failures > 0 {
		text += fmt.Sprintf("\n%d wrong attempt(s) were refused before", r.Failures)
	}
	if trusted, err := keys.ReadTrust(p.TrustFile()); err == nil && len(trusted[r.Peer]) > 1 {
		text += fmt.Sprintf("\n%s now has %d trusted keys; if its old key is gone: herdbridge keys revoke %s OLDKEY", r.Peer, len(trusted[r.Peer]), r.Peer)
	}
	o.line(map[string]any{"paired": r.Peer, "fingerprint": fp, "failures": r.Failures}, text)
}

// PairOffer is `herdbridge pair` on the first host: it prints a one-time
// code, waits for the other host to join with it, and says whom it paired
// with.
func PairOffer(ctx context.Context, cfg PairConfig, out PairOutput) error {
	p, err := OpenPairing(ctx, cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	offer, err := p.Offer(ctx)
	if err != nil {
		return err
	}
	defer offer.Close()
	exp := offer.Expires().UTC().Truncate(time.Second)
	out.line(map[string]any{"code": offer.Code().String(), "expires": exp.Format(time.RFC3339)},
		fmt.Sprintf("pairing code %s (expires %s, in %s; works once)\non the other host run:  herdbridge pair -   and type the code (or echo it into it: a code in the command line shows in ps)\nwaiting for it…",
			offer.Code(), exp.Format(time.RFC3339), time.Until(exp).Round(time.Second)))
	res, err := offer.Wait(ctx)
	if err != nil {
		return err
	}
	out.paired(p, res)
	return nil
}

// PairJoin is `herdbridge pair CODE` on the other host: it pairs with the
// host that printed code and says so.
func PairJoin(ctx context.Context, cfg PairConfig, code pairing.Code, out PairOutput) error {
	p, err := OpenPairing(ctx, cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	res, err := p.Join(ctx, code)
	if err != nil {
		return err
	}
	out.paired(p, res)
	return nil
}
