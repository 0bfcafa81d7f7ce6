package instance

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/pkg/backend"
	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/test/lab"
)

// servicesConfig is a pinned services-form config: each service
// name=listen address, its backends by lab index, 80 -> 8080.
func servicesConfig(t *testing.T, l *lab.Lab, stateDir string, svcs map[string]netip.Addr, backends map[string][]int, order ...string) *config.Config {
	c := labConfig(l)
	c.StateDir = stateDir
	c.Listen, c.Ports, c.Provider, c.Form, c.Services = config.Listen{}, nil, config.Provider{}, config.FormServices, nil
	for _, name := range order {
		static := &config.StaticProvider{}
		for _, i := range backends[name] {
			static.Backends = append(static.Backends, config.Backend{Name: fmt.Sprintf("backend-%d", i+1), IP: l.Backends[i].IP()})
		}
		c.Services = append(c.Services, config.Service{Name: name, Listen: config.Listen{IP: svcs[name]}, Proto: "tcp",
			Ports: []config.PortMapping{{LocalPort: 80, RemotePort: 8080}}, Scheduler: config.SchedulerRoundRobin,
			Provider: config.Provider{Static: static}})
	}
	return c
}

// Issue 29: every service gets its id, its manager and its own routable
// set, with one pool of ids; a start whose config lacks a service the
// pins hold (a reload, or a restart after a crash) keeps it draining: its
// pair still flows, its backend is known (departed), and once its members
// are quiet FreeService frees its id in the data path.
func TestServicesStartAndDrain(t *testing.T) {
	l := lab.New(t, lab.Options{Topology: lab.OneArm})
	extra := testnet.XLBExtraIP(0)
	if err := l.XLB.AddAddress("eth0", netip.PrefixFrom(extra, 24)); err != nil {
		t.Fatal(err)
	}
	addrs := map[string]netip.Addr{"web": l.XLB.IP(), "api": extra}
	backends := map[string][]int{"web": {0, 1}, "api": {1, 2}}
	dir, state := t.TempDir(), testnet.StateDir(t)
	first, err := startPinned(l, servicesConfig(t, l, state, addrs, backends, "web", "api"), dir)
	if err != nil {
		t.Fatal(err)
	}
	svcs := first.Services()
	if len(svcs) != 2 || svcs[0].Name != "web" || svcs[1].Name != "api" || svcs[0].ID == svcs[1].ID {
		t.Fatalf("services %+v, want web and api with their own ids", svcs)
	}
	shared := l.Backends[1].IP()
	var sharedIDs [][2]uint32
	members := map[uint32]bool{}
	for _, s := range svcs {
		refs, err := first.DP.Routable(s.ID)
		if err != nil {
			t.Fatal(err)
		}
		var got []netip.Addr
		for _, r := range refs {
			got = append(got, r.IP)
			if members[r.Member] {
				t.Fatalf("member id %d published twice", r.Member)
			}
			members[r.Member] = true
			if r.IP == shared {
				sharedIDs = append(sharedIDs, [2]uint32{r.ID, r.Member})
			}
		}
		var want []netip.Addr
		for _, i := range backends[s.Name] {
			want = append(want, l.Backends[i].IP())
		}
		slices.SortFunc(got, netip.Addr.Compare)
		if !slices.Equal(got, want) {
			t.Fatalf("service %s's routable set %v, want %v", s.Name, got, want)
		}
	}
	if len(sharedIDs) != 2 || sharedIDs[0][0] != sharedIDs[1][0] {
		t.Fatalf("the backend both services have: (backend id, member id) %v, want one backend id, two member ids", sharedIDs)
	}

	// A connection through api, then a crash; the next start's config
	// has web only.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := l.Client().Dial(ctx, net.JoinHostPort(extra.String(), "80"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	echoLine(t, r, conn, "through api")
	if err := l.XLB.Do(first.Abandon); err != nil {
		t.Fatal(err)
	}
	second, err := startPinned(l, servicesConfig(t, l, state, addrs, backends, "web"), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.XLB.Do(second.Stop) })
	svcs = second.Services()
	if len(svcs) != 2 || svcs[0].Name != "web" || svcs[0].Draining || svcs[1].Name != "api" || !svcs[1].Draining {
		t.Fatalf("services after the restart %+v, want web serving, api draining", svcs)
	}
	api := svcs[1]
	echoLine(t, r, conn, "through the draining api")
	var listed []backend.Status
	for _, b := range api.Backends.Snapshot() {
		listed = append(listed, b)
		if b.State != backend.Departed || b.Discovered {
			t.Errorf("draining service's backend %+v, want departed", b)
		}
	}
	if !slices.ContainsFunc(listed, func(b backend.Status) bool { return b.IP == l.Backends[1].IP() || b.IP == l.Backends[2].IP() }) {
		t.Fatalf("the draining service lists %+v, want the backend its pair is on", listed)
	}
	if second.Pool.Quiet("api") {
		t.Fatal("api quiet before any sample")
	}
	conn.Close()
	// a sample long enough after its members departed, without pairs
	second.Pool.NotePairs(time.Now().Add(backend.IDReuseQuiet+time.Minute), nil)
	if !second.Pool.Quiet("api") || second.Pool.Quiet("web") {
		t.Fatalf("quiet: api %v, web %v; want api only", second.Pool.Quiet("api"), second.Pool.Quiet("web"))
	}
	if err := second.FreeService(api); err != nil {
		t.Fatal(err)
	}
	refs, err := second.DP.Services()
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 1 || refs[0].Name != "web" || refs[0].State != dataplane.ServiceServing {
		t.Fatalf("data path services after FreeService %+v, want web only", refs)
	}
	if got := second.Services(); len(got) != 1 || got[0].Name != "web" {
		t.Fatalf("instance services after FreeService %+v, want web only", got)
	}
}
