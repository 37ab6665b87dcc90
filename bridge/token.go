package bridge

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/herdbridge/herdbridge/bridge/store"
)

// Bearer tokens.
//
// A token is 32 bytes from crypto/rand (256 bits), written "hb_" +
// base64url (NewToken). Only its SHA-256 is kept, in memory and in
// state.db: a leaked store gives no usable token.
//
// Authenticate hashes the candidate, finds the entity through the
// hash -> gid index (a map lookup), then accepts only if the hash is one of
// that entity's own token hashes, compared with crypto/subtle against every
// one of them. The map lookup is not constant time, but what it compares is
// SHA-256(candidate), which a caller cannot steer: learning how far the
// hash of a guess matched a stored hash says nothing about the token (that
// would take a preimage). The constant-time confirmation makes the accept
// decision itself independent of where two hashes differ, and makes the
// entity's token list (the one revocation clears and the store persists)
// the authority rather than the index. It stays O(1) in the number of
// entities (at most maxTokensPerEntity comparisons).

// tokenList is the part of an entity's record that holds its token
// hashes: the list revocation clears and the store persists, at most
// maxTokensPerEntity, newest last. Its entState's mu guards it; every
// method runs with mu held.
type tokenList struct {
	tokens []string
}

// addToken adds hash ("" adds none) and keeps the newest
// maxTokensPerEntity.
func (l *tokenList) addToken(hash string) {
	if hash != "" {
		l.tokens = append(l.tokens, hash)
	}
	if len(l.tokens) > maxTokensPerEntity {
		l.tokens = l.tokens[len(l.tokens)-maxTokensPerEntity:]
	}
}

// loadTokens sets the list as the state file has it.
func (l *tokenList) loadTokens(hashes []string) { l.tokens = hashes }

// clearTokens forgets every token hash and returns them.
func (l *tokenList) clearTokens() []string {
	old := l.tokens
	l.tokens = nil
	return old
}

// hasTokenHash reports whether h is one of the token hashes. Every stored
// hash is compared, in constant time, with no early exit.
func (l *tokenList) hasTokenHash(h string) bool {
	found := 0
	for _, t := range l.tokens {
		found |= subtle.ConstantTimeCompare([]byte(t), []byte(h))
	}
	return found == 1
}

// localName strips "@<this host>" from name; a name of another host is an
// error (its tokens live on that host's gateway).
func (c *Core) localName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if i := strings.LastIndexByte(name, '@'); i >= 0 {
		if host := name[i+1:]; host != c.cfg.Host {
			return "", userErr("%s is on host %s, not this one (%q): revoke it on that host's gateway", Clip(name), Clip(host), c.cfg.Host)
		}
		name = name[:i]
	}
	return name, nil
}

// RevokeTokens revokes every bearer token of the local entity named name.
// From the moment it returns they authenticate nothing (an HTTP request
// carrying one gets 401, so does the next request of an MCP session opened
// with one), and the store forgets them, so a restart does not bring them
// back. The entity keeps its gid, inbox and held messages; `herdbridge
// register` issues it a new token. Socket sessions (`herdbridge mcp`),
// which authenticate by the socket, are not affected. It returns the
// entity and how many tokens it had.
func (c *Core) RevokeTokens(name string) (Entity, int, error) {
	name, err := c.localName(name)
	if err != nil {
		return Entity{}, 0, err
	}
	c.regMu.Lock() // no Register or Remove in between
	defer c.regMu.Unlock()
	if !c.running() {
		return Entity{}, 0, errors.New("bridge: core is not running")
	}
	st := c.reg.named(name)
	if st == nil {
		return Entity{}, 0, userErr("no entity named %s on this host (%s): herdbridge roster lists them", Clip(name), c.cfg.Host)
	}
	// in memory first: the tokens stop working now, whatever the disk does
	st.mu.Lock()
	old := st.clearTokens()
	n := len(old)
	c.reg.dropTokens(st.GID, old)
	e, rec := st.snapshot(), st.record()
	st.mu.Unlock()
	if err := c.st.PutEntity(rec); err != nil {
		return e, n, fmt.Errorf("bridge: the %d token(s) of %s are refused from now on, but %s could not record it (%w): they would work again after a restart; revoke again", n, name, c.st.Path(), err)
	}
	c.log.Info("bearer tokens revoked", LogGID, e.GID, "name", e.Name, "tokens", n)
	return e, n, nil
}

// RevokeStoredTokens revokes every bearer token of the entity named name in
// the state file at path, for when no gateway runs on it (a running gateway
// holds the file's lock: revoke through it, with Core.RevokeTokens). The
// next gateway started on the file does not know the tokens any more.
func RevokeStoredTokens(path, name string) (Entity, int, error) {
	name = strings.TrimSpace(name)
	if i := strings.LastIndexByte(name, '@'); i >= 0 {
		name = name[:i] // the store holds this host's entities only
	}
	rec, err := store.RevokeTokens(path, name)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return Entity{}, 0, userErr("no entity named %s: %s does not exist (nothing was registered on this state dir)", Clip(name), path)
	case errors.Is(err, store.ErrNoEntity):
		return Entity{}, 0, userErr("no entity named %s in %s (herdbridge roster lists them while a gateway runs)", Clip(name), path)
	case err != nil:
		return Entity{}, 0, err
	}
	return entityOf(rec), len(rec.Tokens), nil
}
