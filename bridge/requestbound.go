package bridge

import "container/list"

// The request book's bounds. Every send of the stdio relay carries a
// request_id, and each published call costs the book ~350 B for
// RequestMemory (24 h): under sustained load the book would grow for a
// day. So memory keeps only the most recent published calls — at most
// perEntity per entity and max in all, the oldest evicted first — plus
// the calls running now (never evicted: their outcome is still to be
// recorded). The store keeps every call for RequestMemory, and a repeat
// the book no longer holds is looked up there (requests.recall), so dedup
// stays exact for 24 h, across restarts too. What an evicted call loses:
// a receipt arriving after the eviction (an INJECTED, a FAILED …) no
// longer updates its record, so a later repeat answers with the status it
// had when evicted.

// Default bounds of the in-memory book (Config.RequestsInMemory,
// Config.RequestsPerEntityInMemory).
const (
	DefaultRequestsInMemory          = 1024
	DefaultRequestsPerEntityInMemory = 32
)

// bound orders the published entries of the book, oldest first, in all
// and per entity.
type bound struct {
	max, perEntity int
	byAge          *list.List            // of *reqEntry
	byEntity       map[string]*list.List // gid → its entries, of *reqEntry
}

func newBound(max, perEntity int) bound {
	if max <= 0 {
		max = DefaultRequestsInMemory
	}
	if perEntity <= 0 {
		perEntity = DefaultRequestsPerEntityInMemory
	}
	return bound{max: max, perEntity: perEntity, byAge: list.New(), byEntity: map[string]*list.List{}}
}

// rememberLocked orders e, just published, as the newest, then evicts the
// oldest entries over the bounds (r.mu held).
func (r *requests) rememberLocked(e *reqEntry) {
	if e.inAge != nil {
		return
	}
	l := r.byEntity[e.key.gid]
	if l == nil {
		l = list.New()
		r.byEntity[e.key.gid] = l
	}
	e.inAge, e.inEntity = r.byAge.PushBack(e), l.PushBack(e)
	for l.Len() > r.perEntity && r.evictOldestLocked(l) {
	}
	for r.byAge.Len() > r.max && r.evictOldestLocked(r.byAge) {
	}
}

// evictOldestLocked drops the oldest entry of order l that no call is
// running on; it reports whether there was one.
func (r *requests) evictOldestLocked(l *list.List) bool {
	for el := l.Front(); el != nil; el = el.Next() {
		if e := el.Value.(*reqEntry); e.open == 0 {
			r.dropLocked(e.key, e)
			return true
		}
	}
	return false
}

// forgetLocked takes e out of the orders (r.mu held).
func (r *requests) forgetLocked(e *reqEntry) {
	if e.inAge == nil {
		return
	}
	r.byAge.Remove(e.inAge)
	if l := r.byEntity[e.key.gid]; l != nil {
		l.Remove(e.inEntity)
		if l.Len() == 0 {
			delete(r.byEntity, e.key.gid)
		}
	}
	e.inAge, e.inEntity = nil, nil
}

// inMemory is how many published calls the book keeps in memory.
func (r *requests) inMemory() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byAge.Len()
}
