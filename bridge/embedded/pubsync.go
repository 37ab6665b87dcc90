package embedded

// Group sync of the publish journal: a publisher waits until one
// fdatasync covers its record. Whoever takes syncMu first syncs every
// segment appended to since the last sync, for everyone who appended
// before it began; those queued behind find their record covered and
// return without a syscall. Concurrent sends share one fdatasync.

// syncThrough returns once the journal record numbered lsn is on the disk.
// Under NoSync (--fsync=false) the record's write(2) is all a publish
// waits for, as it is all a commit waits for: the page cache outlives a
// process crash, and an OS crash may lose it, which is what the flag says.
func (t *Transport) syncThrough(lsn uint64) error {
	if t.opts.NoSync {
		return nil
	}
	t.syncMu.Lock()
	defer t.syncMu.Unlock()
	if t.syncedLSN >= lsn {
		return nil
	}
	upto, segs := t.takeDirty()
	for _, i := range segs {
		if err := t.pend.segs[i].Sync(); err != nil {
			t.markDirty(segs)
			return err
		}
	}
	t.syncedLSN = upto
	return nil
}

// takeDirty names the segments appended to since the last sync, and the
// last record appended.
func (t *Transport) takeDirty() (upto uint64, segs []int) {
	t.pmu.Lock()
	defer t.pmu.Unlock()
	for i := range t.pend.dirty {
		if t.pend.dirty[i] {
			segs = append(segs, i)
			t.pend.dirty[i] = false
		}
	}
	return t.pend.lsn, segs
}

// markDirty puts back segments whose sync failed.
func (t *Transport) markDirty(segs []int) {
	t.pmu.Lock()
	defer t.pmu.Unlock()
	for _, i := range segs {
		t.pend.dirty[i] = true
	}
}

// appendPubLocked journals r in the active segment (t.pmu held).
func (t *Transport) appendPubLocked(r *pubRec) error {
	p := &t.pend
	payload, err := encodePub(r.raw, r.targets)
	if err != nil {
		return err
	}
	if err := p.segs[p.active].Append(payload); err != nil {
		return err
	}
	p.lsn++
	r.lsn, r.seg = p.lsn, p.active
	p.unapplied[p.active]++
	p.dirty[p.active] = true
	return nil
}
