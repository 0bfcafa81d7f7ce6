package loadgen

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
)

// pair is a client (192.0.2.20) and a server (192.0.2.31, testnet.Respond
// on :8080) joined by a veth pair, closed in t.Cleanup.
func pair(t *testing.T) (client *testnet.Host, srv *testnet.Server) {
	t.Helper()
	tn := testnet.NewForTest(t, "lg")
	var server *testnet.Host
	err := tn.Build([]testnet.Step{
		{Name: "hosts", Run: func() (err error) {
			if client, err = tn.AddHost("client"); err == nil {
				server, err = tn.AddHost("server")
			}
			return err
		}},
		{Name: "pair", Run: func() error {
			return tn.Pair(client, "eth0", netip.PrefixFrom(testnet.ClientIP(0), 24), server, "eth0", netip.PrefixFrom(testnet.OneArmBackendIP(0), 24))
		}},
		{Name: "server", Run: func() (err error) { srv, err = server.Serve(":8080", testnet.Respond); return err }},
		{Name: "sysctls", Run: func() error { return ReuseSourcePorts(client) }},
		// A fresh veth may drop the first SYNs until its carrier is up
		// (a 1 s retransmit that empties a run's first window).
		{Name: "reachable", Run: func() error {
			if err := testnet.WaitTCP(client, netip.AddrPortFrom(testnet.OneArmBackendIP(0), 8080).String(), 30*time.Second); err != nil {
				return err
			}
			if _, err := srv.WaitCompleted(context.Background(), 1); err != nil {
				return err
			}
			srv.ResetStats()
			return nil
		}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return client, srv
}

// Both close orders complete connections in every window without a
// failure, and the server served every one of them.
func TestRunBothOrders(t *testing.T) {
	client, srv := pair(t)
	target := netip.AddrPortFrom(testnet.OneArmBackendIP(0), 8080)
	for _, order := range []CloseOrder{ClientFirst, ServerFirst} {
		t.Run(order.String(), func(t *testing.T) {
			r, err := Run(context.Background(), client, Config{
				Target: target, Workers: 4, Duration: 3 * time.Second, Window: time.Second, Close: order,
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Log(r)
			if r.Failed() != 0 {
				t.Fatalf("failures: %s %v", r.FailureSummary(), r.Errors)
			}
			if len(r.Windows) != 3 || r.Completed == 0 || len(r.Connects) != r.Completed {
				t.Fatalf("windows %v, %d completed, %d connects", r.Windows, r.Completed, len(r.Connects))
			}
			if st, err := srv.WaitCompleted(context.Background(), r.Completed); err != nil || st.Errors != 0 || st.Resets != 0 {
				t.Fatalf("server: %+v, %v", st, err)
			}
			srv.ResetStats()
			for i, n := range r.Windows {
				if n == 0 {
					t.Fatalf("window %d empty: %v", i, r.Windows)
				}
			}
		})
	}
}

// A port nobody listens on: every connect is refused and counted as such.
func TestRunRefused(t *testing.T) {
	client, _ := pair(t)
	r, err := Run(context.Background(), client, Config{
		Target: netip.AddrPortFrom(testnet.OneArmBackendIP(0), 8099), Workers: 2, Duration: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Completed != 0 || r.Failed() == 0 || r.Failures[Refused] != r.Failed() || len(r.RefusedIn) != r.Failed() {
		t.Fatalf("%v; errors %v", r, r.Errors)
	}
}

// A paced run never starts more connections than its schedule allows
// (Rate per second, plus one per worker and one), however fast the path
// is.
func TestRunPaced(t *testing.T) {
	client, srv := pair(t)
	target := netip.AddrPortFrom(testnet.OneArmBackendIP(0), 8080)
	const rate, workers = 200.0, 8
	d := 2 * time.Second
	r, err := Run(context.Background(), client, Config{
		Target: target, Workers: workers, Duration: d, Window: time.Second, Rate: rate, Close: ServerFirst,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(r)
	if r.Failed() != 0 {
		t.Fatalf("failures: %s %v", r.FailureSummary(), r.Errors)
	}
	if limit := int(rate*d.Seconds()) + workers + 1; r.Completed == 0 || r.Completed > limit {
		t.Fatalf("%d connections completed in a run paced at %.0f/s for %v, want 1..%d", r.Completed, rate, d, limit)
	}
	if _, err := srv.WaitCompleted(context.Background(), r.Completed); err != nil {
		t.Fatal(err)
	}
}

// A negative rate is refused.
func TestRunRefusesNegativeRate(t *testing.T) {
	_, err := Run(context.Background(), nil, Config{Target: netip.MustParseAddrPort("192.0.2.31:8080"), Duration: time.Second, Rate: -1})
	if err == nil {
		t.Fatal("a negative rate was accepted")
	}
}

// With Sources, connection n leaves from Sources[n % len(Sources)]: the
// server sees every source, each as often as the others within one.
func TestRunSources(t *testing.T) {
	client, srv := pair(t)
	var srcs []netip.Addr
	for i := range 4 {
		a := testnet.ClientExtraIP(i)
		if err := client.AddAddress("eth0", netip.PrefixFrom(a, 24)); err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, a)
	}
	r, err := Run(context.Background(), client, Config{
		Target: netip.AddrPortFrom(testnet.OneArmBackendIP(0), 8080), Sources: srcs,
		Workers: 4, Duration: 2 * time.Second, Window: time.Second, Rate: 200, Close: ServerFirst,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(r)
	if r.Failed() != 0 || r.Completed == 0 {
		t.Fatalf("%d completed, failures: %s %v", r.Completed, r.FailureSummary(), r.Errors)
	}
	st, err := srv.WaitCompleted(context.Background(), r.Completed)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := r.Completed, 0
	for _, a := range srcs {
		lo, hi = min(lo, st.Remotes[a]), max(hi, st.Remotes[a])
	}
	if len(st.Remotes) != len(srcs) || hi-lo > 1 {
		t.Fatalf("the server saw %v over %d connections, want each of %v, as often as the others within one", st.Remotes, r.Completed, srcs)
	}
}

// A source of the other address family than the target is refused.
func TestRunRefusesSourceOfOtherFamily(t *testing.T) {
	_, err := Run(context.Background(), nil, Config{Target: netip.MustParseAddrPort("192.0.2.31:8080"), Duration: time.Second,
		Sources: []netip.Addr{netip.MustParseAddr("2001:db8::1")}})
	if err == nil {
		t.Fatal("an IPv6 source for an IPv4 target was accepted")
	}
}
