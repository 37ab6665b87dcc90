package gateway

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/herdbridge/herdbridge/bridge/embedded"
	"github.com/herdbridge/herdbridge/bridge/store"
)

// checkStores judges both store files before either is opened: a damaged
// one, or a state.db that is missing beside a transport.db that still holds
// inboxes (a gateway would start with no entities and their messages would
// be unreachable), is an error naming the file and `herdbridge repair`.
// transport.db is checked whenever it exists, whatever the transport: a
// missing one is a fresh start (or a broker-only gateway).
func checkStores(dir string) error {
	statePath, queuePath := filepath.Join(dir, stateName), filepath.Join(dir, queueName)
	sfi, _, err := store.Check(statePath)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	tfi, inboxes, messages, err := embedded.Check(queuePath)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	if sfi.Missing && !tfi.Empty() {
		return fmt.Errorf("gateway: %s is missing but %s still holds %d inbox(es) and %d message(s): starting would leave them with no entity. "+
			"Both were left as they are and nothing was deleted: restore %s from a backup, or run `herdbridge repair --state-dir %s` to start with an empty registry (it reports the inboxes left without an entity)",
			statePath, queuePath, inboxes, messages, stateName, dir)
	}
	return nil
}

// Repair is `herdbridge repair`: with no gateway running on dir, it
// repairs each damaged store file (store.Repair, embedded.Repair: what is
// readable goes into a fresh file, the damaged one is kept aside with a
// timestamp suffix), creates an empty state.db when it is missing beside a
// transport.db that holds inboxes, and returns a report of what was kept
// and lost, including inboxes left with no registered entity. Healthy
// files are left as they are.
func Repair(dir string, now time.Time) (string, error) {
	if Answers(dir) {
		return "", fmt.Errorf("a gateway is running on %s: stop it first (repair works on files no gateway holds)", dir)
	}
	statePath, queuePath := filepath.Join(dir, stateName), filepath.Join(dir, queueName)
	var b strings.Builder
	sr, err := store.Repair(statePath, now)
	if err != nil {
		return "", err
	}
	tr, err := embedded.Repair(queuePath, now)
	if err != nil {
		return "", err
	}
	b.WriteString(sr.String())
	b.WriteString(tr.String())
	inboxes, err := embedded.Inboxes(queuePath)
	if err != nil {
		return b.String(), err
	}
	if sr.Missing && len(inboxes) > 0 {
		s, err := store.Open(statePath, 0)
		if err != nil {
			return b.String(), err
		}
		s.Close()
		fmt.Fprintf(&b, "%s: created an empty registry beside the %d inbox(es) of %s\n", statePath, len(inboxes), queueName)
	}
	var gids []string
	if _, err := os.Stat(statePath); err == nil {
		if gids, err = store.EntityGIDs(statePath); err != nil {
			return b.String(), err
		}
	}
	registered := map[string]bool{}
	for _, g := range gids {
		registered[g] = true
	}
	var orphans []string
	for gid, n := range inboxes {
		if !registered[gid] && n > 0 {
			orphans = append(orphans, fmt.Sprintf("  inbox %s: %d message(s)\n", gid, n))
		}
	}
	if len(orphans) > 0 {
		sort.Strings(orphans)
		fmt.Fprintf(&b, "%s: %d inbox(es) hold messages for no registered entity (the entity was lost with %s); they stay in the file but nothing can drain them:\n", queuePath, len(orphans), stateName)
		for _, o := range orphans {
			b.WriteString(o)
		}
	}
	if !sr.Damaged && !tr.Damaged {
		b.WriteString("nothing was damaged; nothing was changed\n")
	} else {
		fmt.Fprintf(&b, "repaired: start the gateway again (damaged files are kept aside, suffixed .damaged-%s)\n", now.UTC().Format("20060102T150405Z"))
	}
	return b.String(), nil
}
