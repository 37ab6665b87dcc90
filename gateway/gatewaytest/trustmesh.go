package gatewaytest

import (
	"crypto/ed25519"
	"path/filepath"
	"sync"
	"testing"

	"github.com/herdbridge/herdbridge/gateway"
	"github.com/herdbridge/herdbridge/keys"
)

// trustMesh gives every gateway a test starts on the broker a host key and
// has all of them trust each other, as operators would with `keys show` and
// `keys trust`: the new host trusts the running ones, and they pick the new
// host up from their trust files while running.
var trustMesh struct {
	sync.Mutex
	hosts []meshHost
}

type meshHost struct {
	dir, host string
	pub       ed25519.PublicKey
	g         *gateway.Gateway // once started: reloaded at once when a host joins
}

// MeshStarted records that the gateway g (of a state dir in the mesh) runs.
func MeshStarted(g *gateway.Gateway) {
	trustMesh.Lock()
	defer trustMesh.Unlock()
	for i := range trustMesh.hosts {
		if trustMesh.hosts[i].dir == g.StateDir() {
			trustMesh.hosts[i].g = g
		}
	}
}

// JoinTrustMesh creates the host key of dir and has host and every host
// in the mesh trust each other, until the test ends.
func JoinTrustMesh(t testing.TB, dir, host string) {
	t.Helper()
	k, _, err := keys.LoadOrCreate(dir, host)
	if err != nil {
		t.Fatal(err)
	}
	me := meshHost{dir: dir, host: host, pub: k.Public()}
	trustMesh.Lock()
	defer trustMesh.Unlock()
	for _, h := range trustMesh.hosts {
		if err := keys.Trust(filepath.Join(dir, keys.TrustFile), h.host, h.pub); err != nil {
			t.Fatal(err)
		}
		if err := keys.Trust(filepath.Join(h.dir, keys.TrustFile), host, me.pub); err != nil {
			t.Fatal(err)
		}
		// as if its Watch had run: the newcomer's first heartbeat must not
		// beat the reload (operators trust hosts before traffic flows)
		if h.g != nil {
			if err := h.g.ReloadTrust(); err != nil {
				t.Fatal(err)
			}
		}
	}
	trustMesh.hosts = append(trustMesh.hosts, me)
	t.Cleanup(func() {
		trustMesh.Lock()
		defer trustMesh.Unlock()
		for i, h := range trustMesh.hosts {
			if h.dir == dir {
				trustMesh.hosts = append(trustMesh.hosts[:i], trustMesh.hosts[i+1:]...)
				break
			}
		}
	})
}
