package bridge

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

func syncEntries(host string, n int) []Presence {
	var ps []Presence
	for i := range n {
		ps = append(ps, cleanPresence(Presence{GID: uuid.NewString(), Name: "w" + string(rune('a'+i%26)) + uuid.NewString()[:4], Host: host, Role: RoleWorker, Groups: []string{"build"}, Status: "online"}))
	}
	return ps
}

// A sender's digest matches the receiver's view of the same entries after
// they crossed the wire (JSON both ways, cleaned on arrival).
func TestPresenceDigestSurvivesTheWire(t *testing.T) {
	var o ownSync
	cur := syncEntries("b", 5)
	deltas := o.diffOwn(cur, []string{"claude", "codex"}, 42)
	if len(deltas) != 5 || o.ver != 6 { // five entities and the profiles
		t.Fatalf("deltas %d, ver %d", len(deltas), o.ver)
	}
	p := newPresence()
	for _, d := range deltas {
		raw, _ := json.Marshal(d)
		var got Presence
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		p.applyDelta(cleanPresence(got), time.Now(), time.Second)
	}
	gw := Presence{Name: GatewayName, Host: "b", Started: 42, Profiles: []string{"claude", "codex"}, Digest: &o.digest}
	if match, _ := p.checkDigest(gw, time.Now(), time.Second); !match {
		t.Fatal("the digest does not match the view built from the deltas")
	}
	if again := o.diffOwn(cur, []string{"claude", "codex"}, 42); len(again) != 0 {
		t.Errorf("nothing changed, yet %d deltas", len(again))
	}
	gone := o.diffOwn(cur[1:], []string{"claude", "codex"}, 42)
	if len(gone) != 1 || !gone[0].Gone || gone[0].GID != cur[0].GID || gone[0].Ver != o.ver {
		t.Errorf("a removal's delta: %+v", gone)
	}
}

// A gap, a new epoch or a mismatched digest asks (once per askEvery); a
// stale delta is skipped.
func TestPresenceDeltaSequence(t *testing.T) {
	p := newPresence()
	now := time.Now()
	e := syncEntries("b", 3)
	d := func(i int, ver uint64, epoch int64) Presence { x := e[i]; x.Ver, x.Epoch = ver, epoch; return x }
	if _, ask := p.applyDelta(d(0, 1, 7), now, time.Second); !ask {
		t.Error("a delta of an unknown epoch did not ask")
	}
	p.mu.Lock()
	p.syncOf("b").epoch, p.syncOf("b").ver = 7, 1
	p.mu.Unlock()
	if applied, ask := p.applyDelta(d(1, 2, 7), now, time.Second); !applied || ask {
		t.Errorf("the next version: applied %v ask %v", applied, ask)
	}
	if applied, _ := p.applyDelta(d(1, 2, 7), now, time.Second); applied {
		t.Error("a stale delta applied")
	}
	if applied, ask := p.applyDelta(d(2, 9, 7), now, time.Second); !applied || ask {
		t.Errorf("a gap within askEvery of the last ask: applied %v ask %v (want applied, no second ask)", applied, ask)
	}
	if _, ask := p.applyDelta(d(2, 10, 7), now.Add(2*time.Second), time.Second); !ask {
		t.Error("a gap after askEvery did not ask")
	}
	if applied, _ := p.applyDelta(d(0, 11, 6), now, time.Second); applied {
		t.Error("a delta of a past epoch applied")
	}
	bad := PresenceDigest{Ver: 3, Hash: strings.Repeat("ab", 16), N: 3}
	if match, _ := p.checkDigest(Presence{Host: "b", Name: GatewayName, Started: 7, Digest: &bad}, now, time.Second); match {
		t.Error("a wrong digest matched")
	}
}

// Snapshot pages: duplicates and any order assemble; a page of another
// version starts again; a hash that does not match, a gid twice, or too
// many bytes is refused, and the view only changes on a whole snapshot.
func TestSnapshotPages(t *testing.T) {
	var o ownSync
	entries := syncEntries("b", 400) // two pages at least
	o.diffOwn(entries, nil, 5)
	raws := o.pages(5)
	if len(raws) < 2 {
		t.Fatalf("%d pages for 400 entries", len(raws))
	}
	decode := func(raw []byte) SnapshotPage {
		if len(raw) > maxSnapshotPage {
			t.Fatalf("page of %d bytes", len(raw))
		}
		pg, err := ParseSnapshotPage(raw, "b")
		if err != nil {
			t.Fatal(err)
		}
		return pg
	}
	p := newPresence()
	now := time.Now()
	old := syncEntries("b", 1)[0]
	p.mu.Lock()
	p.putRemote(&remoteEntry{p: compactEntity(old), seen: now})
	p.mu.Unlock()
	order := []int{len(raws) - 1, len(raws) - 1} // out of order, a duplicate
	for i := 0; i < len(raws)-1; i++ {
		order = append(order, i)
	}
	var done []Presence
	for k, i := range order {
		var err error
		if done, err = p.snapshotPage("b", decode(raws[i]), len(raws[i]), now); err != nil {
			t.Fatal(err)
		}
		if done != nil && k != len(order)-1 {
			t.Fatalf("applied after %d of %d pages", k+1, len(order))
		}
		if done == nil && p.entry(old.GID) == nil {
			t.Fatal("the view changed before the snapshot was whole")
		}
	}
	if len(done) != 400 || p.entry(old.GID) != nil || p.entry(entries[7].GID) == nil {
		t.Fatalf("after the snapshot: %d entries, old one kept %v", len(done), p.entry(old.GID) != nil)
	}
	if e, v := p.syncState("b"); e != 5 || v != o.ver {
		t.Errorf("epoch %d ver %d after the snapshot, want 5 %d", e, v, o.ver)
	}
	// a stale snapshot (older version) is dropped
	if done, err := p.snapshotPage("b", SnapshotPage{Epoch: 5, Ver: 1, Hash: o.digest.Hash, N: 400, Pages: 1}, 10, now); done != nil || err != nil {
		t.Errorf("a stale page: %v %v", done, err)
	}
	// a wrong hash is refused
	pg := decode(raws[0])
	pg.Epoch, pg.Pages, pg.Page, pg.N = 6, 1, 0, len(pg.Entries)
	if _, err := p.snapshotPage("b", pg, 10, now); err == nil {
		t.Error("a snapshot whose entries do not hash to its digest was applied")
	}
	// a gid twice is refused
	two := []Presence{entries[0], entries[0]}
	if _, err := p.snapshotPage("b", SnapshotPage{Epoch: 7, Ver: 2, Hash: presenceHash(two, nil), N: 2, Pages: 1, Entries: two}, 10, now); err == nil {
		t.Error("a snapshot listing a gid twice was applied")
	}
	// over the bytes bound
	if _, err := p.snapshotPage("b", SnapshotPage{Epoch: 8, Ver: 2, Hash: o.digest.Hash, N: 400, Pages: 2}, maxSnapshotBytes+1, now); err == nil {
		t.Error("a snapshot over the bytes bound was assembled")
	}
	if p.entry(entries[7].GID) == nil {
		t.Error("a refused snapshot changed the view")
	}
}

func TestParseSnapshotPageRefuses(t *testing.T) {
	gid := uuid.NewString()
	for name, body := range map[string]string{
		"forged host":  `{"epoch":1,"ver":1,"hash":"` + strings.Repeat("0", 32) + `","n":1,"page":0,"pages":1,"entries":[{"gid":"` + gid + `","name":"w","host":"c"}]}`,
		"gateway":      `{"epoch":1,"ver":1,"hash":"` + strings.Repeat("0", 32) + `","n":1,"page":0,"pages":1,"entries":[{"gid":"` + GatewayGID("b") + `","name":"_gateway","host":"b"}]}`,
		"page ≥ pages": `{"epoch":1,"ver":1,"hash":"` + strings.Repeat("0", 32) + `","n":0,"page":1,"pages":1,"entries":[]}`,
		"pages > 64":   `{"epoch":1,"ver":1,"hash":"` + strings.Repeat("0", 32) + `","n":0,"page":0,"pages":65,"entries":[]}`,
		"short hash":   `{"epoch":1,"ver":1,"hash":"00","n":0,"page":0,"pages":1,"entries":[]}`,
		"more than n":  `{"epoch":1,"ver":1,"hash":"` + strings.Repeat("0", 32) + `","n":0,"page":0,"pages":1,"entries":[{"gid":"` + gid + `","name":"w","host":"b"}]}`,
		"oversized":    `{"epoch":1,"ver":1,"hash":"` + strings.Repeat("0", 32) + `","n":0,"page":0,"pages":1,"profiles":["` + strings.Repeat("x", maxSnapshotPage) + `"]}`,
		"not json":     `{`,
	} {
		if _, err := ParseSnapshotPage([]byte(body), "b"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzSnapshotPage(f *testing.F) {
	var o ownSync
	o.diffOwn(syncEntries("b", 3), []string{"claude"}, 9)
	for _, raw := range o.pages(9) {
		f.Add(raw)
	}
	f.Add([]byte(`{"epoch":1,"ver":1,"hash":"00000000000000000000000000000000","n":1,"page":0,"pages":1,"entries":[{"host":"c"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		pg, err := ParseSnapshotPage(body, "b")
		if err != nil {
			return
		}
		if pg.Pages < 1 || pg.Pages > maxSnapshotPages || pg.Page >= pg.Pages || len(pg.Entries) > pg.N {
			t.Fatalf("accepted page %d of %d with %d of %d entries", pg.Page, pg.Pages, len(pg.Entries), pg.N)
		}
		for _, e := range pg.Entries {
			if e.Host != "b" || !isUUID(e.GID) || e.Name == GatewayName {
				t.Fatalf("accepted entry %+v", e)
			}
		}
		p := newPresence()
		_, _ = p.snapshotPage("b", pg, len(body), time.Now()) // never panics
	})
}

func FuzzPresenceDigest(f *testing.F) {
	f.Add(uint64(3), strings.Repeat("ab", 16), 2)
	f.Add(uint64(0), "", 0)
	f.Add(uint64(0), strings.Repeat("zz", 16), -1)
	f.Fuzz(func(t *testing.T, ver uint64, hash string, n int) {
		d := &PresenceDigest{Ver: ver, Hash: hash, N: n}
		if ParseDigest(d) != nil {
			return
		}
		if len(hash) != 32 || n < 0 || n > maxDigestN {
			t.Fatalf("accepted %+v", d)
		}
		p := newPresence()
		_, _ = p.checkDigest(Presence{Host: "b", Name: GatewayName, Started: 1, Digest: d}, time.Now(), time.Second)
	})
}

func FuzzPresenceDelta(f *testing.F) {
	gid := uuid.NewString()
	f.Add([]byte(`{"gid":"`+gid+`","name":"w","host":"b","epoch":5,"ver":1}`), "b")
	f.Add([]byte(`{"gid":"`+gid+`","name":"w","host":"b","epoch":5,"ver":0}`), "b")
	f.Add([]byte(`{"gid":"`+gid+`","name":"w","host":"b","gone":true,"epoch":5,"ver":9}`), "b")
	f.Add([]byte(`{"gid":"`+GatewayGID("b")+`","name":"_gateway","host":"b","epoch":5,"ver":1}`), "b")
	f.Fuzz(func(t *testing.T, body []byte, host string) {
		var probe Presence
		_ = json.Unmarshal(body, &probe)
		env := &Envelope{Host: host, From: probe.GID, Body: body}
		pr, err := presenceBody(env)
		if err != nil {
			return
		}
		delta, err := DeltaFields(pr)
		if err != nil {
			t.Fatalf("presenceBody accepted delta fields DeltaFields refuses: %v", err)
		}
		if delta && (pr.Name == GatewayName || pr.Ver == 0 || pr.Epoch <= 0 || pr.Host != host) {
			t.Fatalf("accepted delta %+v", pr)
		}
		p := newPresence()
		_, _ = p.applyDelta(pr, time.Now(), time.Second)
	})
}

// A delta applied past a gap survives a snapshot older than it: the
// snapshot replaces the view, then the delta is applied again and the
// version moves over it.
func TestSnapshotKeepsDeltasAhead(t *testing.T) {
	p := newPresence()
	now := time.Now()
	e := syncEntries("b", 2)
	p.mu.Lock()
	p.syncOf("b").epoch, p.syncOf("b").ver = 7, 1
	p.mu.Unlock()
	late := e[1]
	late.Epoch, late.Ver = 7, 3
	if applied, _ := p.applyDelta(late, now, time.Second); !applied {
		t.Fatal("a delta past a gap not applied")
	}
	snap := []Presence{e[0]}
	done, err := p.snapshotPage("b", SnapshotPage{Epoch: 7, Ver: 2, Hash: presenceHash(snap, nil), N: 1, Pages: 1, Entries: snap}, 100, now)
	if err != nil || done == nil {
		t.Fatalf("snapshot: %v %v", done, err)
	}
	if p.entry(e[0].GID) == nil || p.entry(e[1].GID) == nil {
		t.Errorf("after the snapshot: e0 %v, e1 (the delta ahead) %v", p.entry(e[0].GID) != nil, p.entry(e[1].GID) != nil)
	}
	if _, v := p.syncState("b"); v != 3 {
		t.Errorf("ver %d after the snapshot and the delta ahead, want 3", v)
	}
}
