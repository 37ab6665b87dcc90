package bridge

// registry indexes the local entities: by gid, by name, and by the hash
// of each bearer token. It owns only the indexes; an entity's own state is
// guarded by the entity's lock. Its lock is a leaf: it is never held while
// an entity's lock is taken.
type registry struct {
	mu     leafMutex
	byGID  map[string]*entState
	byName map[string]string // name -> gid
	tokens map[string]string // token hash -> gid
}

func newRegistry() *registry {
	return &registry{byGID: map[string]*entState{}, byName: map[string]string{}, tokens: map[string]string{}}
}

// get is the local entity gid, nil when none.
func (r *registry) get(gid string) *entState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byGID[gid]
}

// named is the local entity called name, nil when none.
func (r *registry) named(name string) *entState {
	r.mu.Lock()
	defer r.mu.Unlock()
	if gid, ok := r.byName[name]; ok {
		return r.byGID[gid]
	}
	return nil
}

// byToken is the entity a token hash was issued to, nil when none.
func (r *registry) byToken(hash string) *entState {
	r.mu.Lock()
	defer r.mu.Unlock()
	if gid, ok := r.tokens[hash]; ok {
		return r.byGID[gid]
	}
	return nil
}

// all lists the local entities.
func (r *registry) all() []*entState {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*entState, 0, len(r.byGID))
	for _, st := range r.byGID {
		out = append(out, st)
	}
	return out
}

// names lists the local entities' names.
func (r *registry) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.byName))
	for n := range r.byName {
		out = append(out, n)
	}
	return out
}

// put indexes st under its gid, name and token hashes.
func (r *registry) put(st *entState, tokens []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byGID[st.GID] = st
	r.byName[st.Name] = st.GID
	for _, h := range tokens {
		r.tokens[h] = st.GID
	}
}

// drop removes st and its token hashes.
func (r *registry) drop(st *entState, tokens []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.byGID, st.GID)
	delete(r.byName, st.Name)
	r.dropTokensLocked(st.GID, tokens)
}

// dropTokens forgets token hashes issued to gid.
func (r *registry) dropTokens(gid string, tokens []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dropTokensLocked(gid, tokens)
}

func (r *registry) dropTokensLocked(gid string, tokens []string) {
	for _, h := range tokens {
		if r.tokens[h] == gid {
			delete(r.tokens, h)
		}
	}
}

// caller is the local entity a call comes from.
func (c *Core) caller(gid string) (*entState, error) {
	if st := c.reg.get(gid); st != nil {
		st.mu.Lock()
		st.seen(c.cfg.Now())
		st.mu.Unlock()
		return st, nil
	}
	return nil, userErr("this session's entity is not registered on this gateway: register again")
}
