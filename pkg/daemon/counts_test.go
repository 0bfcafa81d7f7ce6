package daemon

import (
	"net/netip"
	"testing"

	"github.com/xlbproject/xlb/pkg/backend"
	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/instance"
	"github.com/xlbproject/xlb/pkg/maintenance"
	"github.com/xlbproject/xlb/pkg/snapshot"
)

// Issue 29: each service's connection counters are the sums of its
// members' cells, and never decrease while it keeps its id: a member id
// another service took over leaves its share with the service it was
// counted for. Closures are split by initiator from the members' cells. With one service they are the instance's.
func TestServiceCounts(t *testing.T) {
	ip := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{192, 0, 2, byte(30 + i)}) }
	svc := func(name string, members ...uint32) *instance.Service {
		pool := backend.NewPool(nil)
		var known []backend.Known
		for _, m := range members {
			known = append(known, backend.Known{ID: m, Backend: m, Service: name, IP: ip(int(m))})
		}
		return &instance.Service{Name: name, Backends: backend.NewManager(backend.NewStatic(nil), nil, nil,
			backend.Options{Service: name, Pool: pool, Known: known})}
	}
	sample := func(opened ...uint64) *maintenance.Sample {
		s := &maintenance.Sample{}
		for m, o := range opened {
			s.Backends = append(s.Backends, maintenance.BackendSample{ID: uint32(m),
				Stats:  dataplane.BackendStats{Opened: o, ClosedFIN: o / 2, ClosedFINByBackend: o / 4, ClosedRST: 1, ClosedRSTByBackend: 1},
				Reaped: dataplane.ReapedCounts{Orphaned: o / 2}})
		}
		return s
	}
	var c serviceCounter
	got := c.add([]*instance.Service{svc("web", 0), svc("api", 1)}, sample(5, 3))
	if got["web"].Opened != 5 || got["api"].Opened != 3 || got["api"].Orphaned != 1 {
		t.Fatalf("first sample: %+v, want web 5 opened, api 3 (1 orphaned)", got)
	}
	// closures by kind and initiator: the members' cells split by the backend's share
	if want := (maintenance.Closed{ClientFIN: 1, BackendFIN: 1, BackendRST: 1}); got["web"].Closed != want {
		t.Fatalf("web's closures %+v, want %+v", got["web"].Closed, want)
	}
	// api's member 1 is gone (its id reset and taken by web's new member,
	// which opened 2 since)
	got = c.add([]*instance.Service{svc("web", 0, 1), svc("api")}, sample(7, 2))
	if got["web"].Opened != 9 || got["api"].Opened != 3 || got["api"].Orphaned != 1 {
		t.Fatalf("after the reuse: %+v, want web 7+2 opened, api still 3 (1 orphaned)", got)
	}
	one := &maintenance.Sample{Opened: 11, Orphaned: 2, Closed: maintenance.Closed{ClientFIN: 4, BackendRST: 1}}
	if got := (&serviceCounter{}).add([]*instance.Service{svc("web", 0)}, one); got["web"] != (snapshot.ServiceCounts{Opened: 11, Orphaned: 2, Closed: one.Closed}) {
		t.Fatalf("one service: %+v, want the instance's counters", got["web"])
	}
}
