package health

import (
	"context"
	"encoding/hex"
	"net/netip"
	"testing"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/pkg/config"
)

// dnsQuery is the README's udp check payload: a DNS query for ". IN NS".
var dnsQuery = mustHex("5842010000010000000000000000020001")

func mustHex(s string) string {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestUDPProbe: a type udp check (issue 31) in a two-host lab. Host a
// (192.0.2.20, and 192.0.2.21 on eth0) checks host b (192.0.2.31), which
// runs an echo, a named echo ("b1|" and the request) and a sink that never
// answers; a closed port answers port unreachable.
func TestUDPProbe(t *testing.T) {
	tn := testnet.NewForTest(t, "hu")
	var a, b *testnet.Host
	var echo *testnet.UDPServer
	bIP := testnet.OneArmBackendIP(0)
	err := tn.Build([]testnet.Step{
		{Name: "hosts", Run: func() (err error) {
			if a, err = tn.AddHost("a"); err == nil {
				b, err = tn.AddHost("b")
			}
			return err
		}},
		{Name: "link", Run: func() error {
			if err := tn.Pair(a, "eth0", netip.PrefixFrom(testnet.ClientIP(0), 24), b, "eth0", netip.PrefixFrom(bIP, 24)); err != nil {
				return err
			}
			return a.AddAddress("eth0", netip.PrefixFrom(testnet.ClientIP(1), 24))
		}},
		{Name: "servers", Run: func() (err error) {
			if echo, err = b.ServeUDP(":53", testnet.UDPEcho); err != nil {
				return err
			}
			if _, err = b.ServeUDP(":5353", testnet.UDPNameEcho("b1")); err != nil {
				return err
			}
			_, err = b.ServeUDP(":5400", testnet.UDPSink)
			return err
		}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The first datagram may wait for ARP: warm the path up.
	if _, err := testnet.WaitUDP(a, netip.AddrPortFrom(bIP, 53).String(), []byte("warm"), waitLong); err != nil {
		t.Fatal(err)
	}

	to := func(port uint16) Target { return Target{IP: bIP, Port: port} }
	bound := to(53)
	bound.Source, bound.Interface = testnet.ClientIP(1), "eth0"
	for _, tc := range []struct {
		name           string
		expect         string
		target         Target
		want           string // error text; "" for a pass
		timeout        time.Duration
		wantFromSource netip.Addr // the echo saw the payload from this address
	}{
		{name: "any reply passes", target: to(53), wantFromSource: testnet.ClientIP(0)},
		{name: "reply starts with expect_hex", expect: dnsQuery[:4], target: to(53)},
		{name: "named reply starts with expect_hex", expect: "b1|" + dnsQuery, target: to(5353)},
		{name: "reply does not start with expect_hex", expect: "b2|", target: to(5353), want: "reply does not start with expect_hex"},
		{name: "expect longer than the reply", expect: dnsQuery + "more", target: to(53), want: "reply does not start with expect_hex"},
		{name: "port unreachable", target: to(5999), want: "read: connection refused"},
		{name: "no reply", target: to(5400), want: "timeout", timeout: 300 * time.Millisecond},
		{name: "from source 192.0.2.21 out of eth0", target: bound, wantFromSource: testnet.ClientIP(1)},
		{name: "bound to a missing device", target: Target{IP: bIP, Port: 53, Interface: "xlbnosuch0"},
			want: "connect: bind to device xlbnosuch0: no such device"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			timeout := tc.timeout
			if timeout == 0 {
				timeout = waitLong
			}
			cfg := config.HealthCheck{Type: config.HealthCheckUDP, Interval: time.Second, Timeout: timeout,
				Rise: 2, Fall: 3, Payload: dnsQuery, Expect: tc.expect}
			echo.ResetStats()
			err := a.Do(func() error { return probe(context.Background(), cfg, tc.target, cfg.Timeout) })
			if got := errText(err); got != tc.want {
				t.Fatalf("check: %q, want %q", got, tc.want)
			}
			if !tc.wantFromSource.IsValid() {
				return
			}
			st := echo.Stats()
			if st.Datagrams != 1 || st.BytesIn != int64(len(dnsQuery)) || len(st.Peers) != 1 {
				t.Fatalf("echo saw %+v", st)
			}
			for from := range st.Peers {
				if from.Addr() != tc.wantFromSource {
					t.Errorf("payload from %v, want %v", from, tc.wantFromSource)
				}
			}
		})
	}
}
