package dataplane_test

import (
	"fmt"
	"testing"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
	"github.com/xlbproject/xlb/pkg/sched"
)

// BenchmarkNewConnectionSYNScheduler is BenchmarkNewConnectionSYN for each
// scheduler (issue 30's closing note: the SYN's cost with each scheduler
// against round robin) over a routable set of 3 and of 100 backends,
// weights 1..4 (Maglev: a table of sched.MinMaglevSize entries). The 100
// backends share testnet's 64 one-arm addresses (a backend id each: the
// data path tells backends apart by id).
func BenchmarkNewConnectionSYNScheduler(b *testing.B) {
	for _, sc := range []struct{ name, kind, hash string }{
		{"round_robin", dataplane.SchedulerRoundRobin, ""},
		{"weighted_round_robin", dataplane.SchedulerWeightedRR, ""},
		{"maglev_five_tuple", dataplane.SchedulerMaglev, dataplane.MaglevHashFiveTuple},
		{"maglev_client_ip", dataplane.SchedulerMaglev, dataplane.MaglevHashClientIP},
	} {
		for _, n := range []int{3, 100} {
			b.Run(fmt.Sprintf("%s/backends=%d", sc.name, n), func(b *testing.B) {
				be := newBenchEnvWith(b, benchMaxPairs+16, 0, min(n, testnet.MaxBackends), nil, func(e *dt.Env) { benchScheduler(b, e, sc.kind, sc.hash, n) })
				benchNewConnections(b, be)
				if s, ok := be.e.DP.Schedule(be.e.Services[0].ID); ok {
					b.ReportMetric(float64(s.Len), "table-entries")
				}
				if c := be.e.Counters(b); c.SchedFallbacks != 0 {
					b.Fatalf("%d SYNs found no schedule", c.SchedFallbacks)
				}
			})
		}
	}
}

// benchScheduler configures e's service with scheduler kind (and Maglev
// hash) and publishes n backends, weights 1..4.
func benchScheduler(b *testing.B, e *dt.Env, kind, hash string, n int) {
	b.Helper()
	svc := &e.Settings.Services[0]
	svc.Scheduler, svc.MaglevHash = kind, hash
	if kind == dataplane.SchedulerMaglev {
		svc.TableSize = sched.MinMaglevSize
	}
	if _, err := e.DP.Configure(e.Settings); err != nil {
		b.Fatal(err)
	}
	refs := make([]dataplane.BackendRef, n)
	for i := range refs {
		refs[i] = dataplane.BackendRef{ID: uint32(i), Member: uint32(i), IP: testnet.OneArmBackendIP(i % testnet.MaxBackends),
			Name: fmt.Sprintf("backend-%d", i), Weight: uint16(1 + i%4)}
	}
	if err := e.DP.SetRoutable(e.Services[0].ID, refs); err != nil {
		b.Fatal(err)
	}
}
