package bridge

import "unique"

// remoteEntity is what presence keeps of another host's entity: the fields
// an entity's entry carries, not a whole Presence (264 bytes, most of them
// the _gateway entry's). A gateway in a fabric of 1,000 hosts × 20 agents
// holds 20,000 of these. odd keeps the whole entry when it carried more
// than these fields (a gateway's field on an entity, from a peer newer or
// odder than this one): the digest hashes what was sent, all of it.
type remoteEntity struct {
	GID, Name, Host string
	Role            Role
	PaneID, Status  string
	Groups          []string
	Forward         bool
	odd             *Presence
}

// compactEntity is what presence keeps of p, its strings interned: host,
// role and status repeat across entities, and one process of simulated
// gateways (memnettest) holds each entity once per gateway.
func compactEntity(p Presence) remoteEntity {
	e := remoteEntity{GID: intern(p.GID), Name: intern(p.Name), Host: intern(p.Host), Role: Role(intern(string(p.Role))),
		PaneID: intern(p.PaneID), Status: intern(p.Status), Forward: p.Forward}
	if len(p.Groups) > 0 {
		e.Groups = make([]string, len(p.Groups))
		for i, g := range p.Groups {
			e.Groups[i] = intern(g)
		}
	}
	if carriesMore(p) {
		e.odd = &p
	}
	return e
}

// carriesMore reports whether p has a field remoteEntity does not keep,
// other than the delta's and the digest's (which the hash leaves out too).
func carriesMore(p Presence) bool {
	return len(p.Profiles) > 0 || p.Key != "" || p.Started != 0 || len(p.Trusts) > 0 || p.DeadLetterNotices ||
		p.GiveUps || p.SealKey != "" || p.SealKeyID != "" || p.SealsBroadcasts
}

// presence is the entry e was made from (without its delta's fields).
func (e remoteEntity) presence() Presence {
	if e.odd != nil {
		p := *e.odd
		p.Epoch, p.Ver, p.Digest, p.Gone = 0, 0, nil, false
		return p
	}
	return Presence{GID: e.GID, Name: e.Name, Host: e.Host, Role: e.Role, Groups: e.Groups, PaneID: e.PaneID, Status: e.Status, Forward: e.Forward}
}

// intern is s held once per process.
func intern(s string) string {
	if s == "" {
		return ""
	}
	return unique.Make(s).Value()
}
