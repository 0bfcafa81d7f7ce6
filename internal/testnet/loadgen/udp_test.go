package loadgen

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
)

// A DNS-style UDP load against a named echo: every port makes all its
// exchanges, each reply comes from the server's address and port and
// carries the name and its request; the server saw each port as a peer.
func TestRunUDP(t *testing.T) {
	tn := testnet.NewForTest(t, "lu")
	var client, server *testnet.Host
	var srv *testnet.UDPServer
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
		{Name: "server", Run: func() (err error) { srv, err = server.ServeUDP(":5353", testnet.UDPNameEcho("b1")); return err }},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	target := netip.AddrPortFrom(testnet.OneArmBackendIP(0), 5353)
	if _, err := testnet.WaitUDP(client, target.String(), []byte("warm"), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	srv.ResetStats()
	const ports, exchanges = 50, 4
	res, err := RunUDP(context.Background(), client, UDPConfig{Target: target, FirstPort: 20000, Ports: ports, Exchanges: exchanges,
		Workers: 8, Retries: 5})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != ports {
		t.Fatalf("%d ports, want %d", len(res), ports)
	}
	for i, p := range res {
		if p.Err != nil || p.Port != uint16(20000+i) || len(p.Replies) != exchanges {
			t.Fatalf("port %d: %+v", i, p)
		}
		for n, r := range p.Replies {
			req := fmt.Sprintf("%d.%d", p.Port, n)
			if r.From != target || r.Request != req || string(r.Payload) != "b1"+testnet.UDPNameSep+req {
				t.Errorf("port %d reply %d: %+v", p.Port, n, r)
			}
		}
	}
	st := srv.Stats()
	if len(st.Peers) != ports {
		t.Errorf("server saw %d peers, want %d", len(st.Peers), ports)
	}
	for peer := range st.Peers {
		if peer.Addr() != testnet.ClientIP(0) || peer.Port() < 20000 || peer.Port() >= 20000+ports {
			t.Errorf("peer %v", peer)
		}
	}

	// A closed port: every exchange times out after its resends.
	res, err = RunUDP(context.Background(), client, UDPConfig{Target: netip.AddrPortFrom(testnet.OneArmBackendIP(0), 5999),
		FirstPort: 21000, Ports: 2, Timeout: 100 * time.Millisecond, Retries: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res {
		if p.Err == nil || !strings.Contains(p.Err.Error(), "no reply after 2 tries") || p.Resent != 1 {
			t.Errorf("closed port: %+v", p)
		}
	}
}
