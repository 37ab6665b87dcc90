package bridge

// spawnSlots counts the spawned workers of this host against the limits:
// every registered entity a spawn made (by gid, with its profile) and every
// spawn under way (a reservation, taken before its pane is opened). A spawn
// reserves first and turns its reservation into the worker's gid once it is
// registered, so two spawns racing for the last slot cannot both win, and a
// worker that is removed frees its slot. The registered ones are loaded
// from the registry at start, so a restart keeps the count. Its lock is a
// leaf.
type spawnSlots struct {
	mu       leafMutex
	live     map[string]string // gid -> profile
	reserved map[int]string    // reservation -> profile
	next     int
}

// slotCount is how many workers a limit counts, for the refusal.
type slotCount struct {
	host, profile int
}

// reserve takes a slot for one spawn of profile, or says which limit is
// reached and how many count against it.
func (s *spawnSlots) reserve(l SpawnLimits, profile string) (release func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.countLocked(profile)
	if l.MaxWorkers > 0 && n.host >= l.MaxWorkers {
		return nil, userErr("spawn refused: this host runs %d spawned worker(s), its maxWorkers limit is %d: wait for one to finish or remove one", n.host, l.MaxWorkers)
	}
	if m := l.Profiles[profile].MaxWorkers; m > 0 && n.profile >= m {
		return nil, userErr("spawn refused: profile %s runs %d worker(s), its maxWorkers limit is %d: wait for one to finish or remove one", profile, n.profile, m)
	}
	if s.reserved == nil {
		s.reserved = map[int]string{}
	}
	s.next++
	id := s.next
	s.reserved[id] = profile
	return func() { s.mu.Lock(); delete(s.reserved, id); s.mu.Unlock() }, nil
}

func (s *spawnSlots) countLocked(profile string) slotCount {
	var n slotCount
	for _, p := range s.live {
		n.host++
		if p == profile {
			n.profile++
		}
	}
	for _, p := range s.reserved {
		n.host++
		if p == profile {
			n.profile++
		}
	}
	return n
}

// bind counts the registered worker gid of profile (idempotent).
func (s *spawnSlots) bind(gid, profile string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live == nil {
		s.live = map[string]string{}
	}
	s.live[gid] = profile
}

// free forgets gid: its slot is free.
func (s *spawnSlots) free(gid string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.live, gid)
}
