package bridge

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"regexp"
	"time"
)

// Role is what an entity is to the fabric (SPEC §1).
type Role string

// Roles.
const (
	RolePrimary      Role = "primary"
	RoleWorker       Role = "worker"
	RoleOrchestrator Role = "orchestrator"
)

// Valid reports whether r is one of the three roles.
func (r Role) Valid() bool {
	return r == RolePrimary || r == RoleWorker || r == RoleOrchestrator
}

// Pulls reports whether messages to this role are drained through MCP (the
// reply path) rather than typed into a pane.
func (r Role) Pulls() bool { return r != RoleWorker }

// Entity is anything with an inbox. It is keyed by (Host, Name): registering
// an existing name re-attaches to the same gid and inbox.
type Entity struct {
	GID        string    `json:"gid"`
	Name       string    `json:"name"`
	Host       string    `json:"host"`
	Role       Role      `json:"role"`
	Groups     []string  `json:"groups,omitempty"`
	PaneID     string    `json:"paneId,omitempty"`
	Registered time.Time `json:"registered"`
	// Spawned: bridge_spawn started it in its pane (bridge_stop closes
	// that pane by default).
	Spawned bool `json:"spawned,omitempty"`
	// Profile is the spawn profile a spawned worker was started from
	// (it counts against the spawn limits while it is registered).
	Profile string `json:"profile,omitempty"`
	// History: the entity's messages are kept in its history (history.go).
	History bool `json:"history,omitempty"`
}

// Addr is the entity's fully qualified name.
func (e Entity) Addr() string { return e.Name + "@" + e.Host }

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ValidName reports whether n can name an entity.
func ValidName(n string) bool { return nameRE.MatchString(n) }

// NewToken returns a fresh bearer token and the hash under which it is stored.
func NewToken() (token, hash string) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("bridge: no randomness: %v", err))
	}
	token = "hb_" + base64.RawURLEncoding.EncodeToString(b[:])
	return token, HashToken(token)
}

// HashToken is how tokens are stored and looked up: never in the clear.
func HashToken(token string) string {
	s := sha256.Sum256([]byte(token))
	return hex.EncodeToString(s[:])
}
