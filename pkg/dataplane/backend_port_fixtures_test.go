package dataplane_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// Backend ports from discovery (issue 14; bpf/layout.h struct port_map): a
// mapping without a remote port (PortMap.Remote 0) sends each new pair to
// the port of the backend it picks (BackendRef.Port); a mapping with one
// ignores the backends' ports. SetRoutable refuses a backend without a
// port while such a mapping exists.
func TestRemotePortFromBackend(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	refs := []dataplane.BackendRef{{ID: 0, Member: 0, IP: e.Backends[0], Port: 9001}, {ID: 1, Member: 1, IP: e.Backends[1], Port: 9002}}
	if err := e.DP.SetRoutable(0, refs); err != nil {
		t.Fatal(err)
	}
	s := e.Settings
	s = s.WithPorts([]dataplane.PortMap{{Local: 80, Remote: 0}, {Local: 443, Remote: 8443}})
	if _, err := e.DP.Configure(s); err != nil {
		t.Fatal(err)
	}

	seen := map[uint32]int{}
	for i := range 4 {
		k := dial(t, e, uint16(33000+i), synOptions(7))
		id := uint32(k.p.Fwd.BackendId)
		if id >= uint32(len(refs)) {
			t.Fatalf("pair %d went to backend id %d, not a routable one", i, id)
		}
		if want := netip.AddrPortFrom(refs[id].IP, refs[id].Port); k.p.Backend() != want || k.p.Rev.NewSrc() != netip.AddrPortFrom(dt.ListenIP, 80) {
			t.Fatalf("pair %d (backend id %d): to %v, answered from %v; want to %v, answered from %v", i, id, k.p.Backend(), k.p.Rev.NewSrc(), want, netip.AddrPortFrom(dt.ListenIP, 80))
		}
		k.forward("SYN-ACK from the backend's own port", k.synAck(), counted{})
		seen[id]++
	}
	if seen[0] != 2 || seen[1] != 2 {
		t.Fatalf("pairs per backend id %v, want 2 each (round robin)", seen)
	}

	c := dt.Client(34000)
	e.MustRun(t, synFrom(e, c, 443).Frame(), e.Front, dt.XDPTX)
	if p := e.MustPair(t, c, 443); p.Backend().Port() != 8443 {
		t.Fatalf("a pair of listen port 443 (remote 8443) went to %v", p.Backend())
	}

	portless := []dataplane.BackendRef{refs[0], {ID: 2, Member: 2, IP: e.Backends[2]}}
	if err := e.DP.SetRoutable(0, portless); err == nil || !strings.Contains(err.Error(), "backend id 2") || !strings.Contains(err.Error(), "listen port 80") {
		t.Fatalf("SetRoutable with a backend without a port while listen port 80 has no remote port: %v", err)
	}
	s = s.WithPorts([]dataplane.PortMap{{Local: 80, Remote: 8080}})
	if _, err := e.DP.Configure(s); err != nil {
		t.Fatal(err)
	}
	if err := e.DP.SetRoutable(0, portless); err != nil {
		t.Fatalf("SetRoutable with a backend without a port, every mapping with a remote port: %v", err)
	}
}
