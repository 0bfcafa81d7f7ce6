package instance

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/sched"
)

// TestMaglevSettings (issue 30): the data path gets a Maglev service's
// hash (five_tuple unless set) and table size: maglev.table_size, else,
// with static backends, sched.MaglevSize of their configured count, else
// (Kubernetes) 65521; the other schedulers get neither.
func TestMaglevSettings(t *testing.T) {
	static := func(n int) config.Provider {
		p := &config.StaticProvider{}
		for i := range n {
			p.Backends = append(p.Backends, config.Backend{Name: fmt.Sprint("b", i), IP: netip.AddrFrom4([4]byte{198, 51, 100, byte(i + 1)}), Weight: 1})
		}
		return config.Provider{Static: p}
	}
	k8s := config.Provider{Kubernetes: &config.KubernetesProvider{Namespace: "shop", Service: "web"}}
	for _, tc := range []struct {
		name string
		s    config.Service
		want *config.Maglev
	}{
		{"round robin", config.Service{Scheduler: config.SchedulerRoundRobin, Provider: static(3)}, nil},
		{"weighted round robin", config.Service{Scheduler: config.SchedulerWeightedRoundRobin, Provider: static(3)}, nil},
		{"maglev, defaults, 3 static", config.Service{Scheduler: config.SchedulerMaglev, Provider: static(3)},
			&config.Maglev{Hash: config.MaglevHashFiveTuple, TableSize: sched.MaglevSize(3)}},
		{"maglev, client_ip, size defaulted, 200 static", config.Service{Scheduler: config.SchedulerMaglev, Provider: static(200),
			Maglev: &config.Maglev{Hash: config.MaglevHashClientIP}},
			&config.Maglev{Hash: config.MaglevHashClientIP, TableSize: sched.MaglevSize(200)}},
		{"maglev, table_size set", config.Service{Scheduler: config.SchedulerMaglev, Provider: static(3),
			Maglev: &config.Maglev{TableSize: 131071}},
			&config.Maglev{Hash: config.MaglevHashFiveTuple, TableSize: 131071}},
		{"maglev, Kubernetes", config.Service{Scheduler: config.SchedulerMaglev, Provider: k8s},
			&config.Maglev{Hash: config.MaglevHashFiveTuple, TableSize: 65521}},
	} {
		got := maglevSettings(tc.s)
		if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if sched.MaglevSize(200) == sched.MaglevSize(3) {
		t.Error("200 and 3 static backends get one size: the test shows nothing")
	}
}
