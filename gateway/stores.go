package gateway

import (
	"fmt"
	"path/filepath"

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
