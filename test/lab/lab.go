package lab

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/xlbproject/xlb/internal/testnet"
)

// Host is one namespace of a lab: a client, the XLB host, a backend, or a
// bridge ("lan") namespace. Name is its role: "client1", "xlb",
// "backend2", "lan", "lan-front", "lan-back".
type Host = testnet.Host

// Iface is one endpoint interface of a Host.
type Iface = testnet.Iface

// Lab is a built topology. Fields are read-only after Start returns.
type Lab struct {
	Prefix   string
	Topology Topology
	Options  Options // with defaults filled in

	Clients  []*Host    // Clients[0] is Client()
	XLB      *Host      // eth0 (and eth1 in TwoArm); no XDP program attached
	Backends []*Backend // in address order
	LANs     []*Host    // bridge namespaces: [lan] or [lan-front, lan-back]

	net *testnet.Topology
}

// Backend is a backend host with its echo and sink servers (nil when
// disabled in Options): TCP, and UDP on the same ports (UDPEcho answers
// each datagram with itself, UDPSink only counts; issue 31).
type Backend struct {
	*Host
	Echo *testnet.Server
	Sink *testnet.Server

	UDPEcho *testnet.UDPServer
	UDPSink *testnet.UDPServer
}

// Client is the first client.
func (l *Lab) Client() *Host { return l.Clients[0] }

// Hosts returns every namespace of the lab: bridge namespaces, clients,
// XLB, backends.
func (l *Lab) Hosts() []*Host { return l.net.Hosts() }

// EchoAddr is "IP:port" of backend i's echo server (i counts from 0), or
// "" when the echo server is disabled.
func (l *Lab) EchoAddr(i int) string { return serverAddr(l.Backends[i], l.Backends[i].Echo) }

// SinkAddr is "IP:port" of backend i's sink server (i counts from 0), or
// "" when the sink server is disabled.
func (l *Lab) SinkAddr(i int) string { return serverAddr(l.Backends[i], l.Backends[i].Sink) }

func serverAddr(b *Backend, s *testnet.Server) string {
	if s == nil {
		return ""
	}
	return netip.AddrPortFrom(b.IP(), s.Addr().Port()).String()
}

// servers are the backend's echo and sink servers that run.
func (b *Backend) servers() []*testnet.Server {
	var ss []*testnet.Server
	for _, s := range []*testnet.Server{b.Echo, b.Sink} {
		if s != nil {
			ss = append(ss, s)
		}
	}
	return ss
}

// Stats merges the statistics of the backend's echo and sink servers
// (Conns: echo's first, then sink's).
func (b *Backend) Stats() testnet.Stats {
	st := testnet.Stats{Remotes: map[netip.Addr]int{}}
	for _, s := range b.servers() {
		o := s.Stats()
		st.Accepted += o.Accepted
		st.Completed += o.Completed
		st.Active += o.Active
		for a, n := range o.Remotes {
			st.Remotes[a] += n
		}
		st.BytesIn += o.BytesIn
		st.BytesOut += o.BytesOut
		st.Resets += o.Resets
		st.Errors += o.Errors
		st.Conns = append(st.Conns, o.Conns...)
		st.RecordsDropped += o.RecordsDropped
	}
	return st
}

// ResetStats zeroes the statistics of the backend's echo and sink servers.
func (b *Backend) ResetStats() {
	for _, s := range b.servers() {
		s.ResetStats()
	}
	for _, s := range []*testnet.UDPServer{b.UDPEcho, b.UDPSink} {
		if s != nil {
			s.ResetStats()
		}
	}
}

// ResetStats zeroes the statistics of every backend server.
func (l *Lab) ResetStats() {
	for _, b := range l.Backends {
		b.ResetStats()
	}
}

// Start builds a lab. On error everything already created is removed and
// the returned Lab is nil. Requires root (CAP_NET_ADMIN, CAP_SYS_ADMIN,
// CAP_BPF).
func Start(opts Options) (*Lab, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	tn, err := testnet.New(testnet.Config{Prefix: o.Prefix, IPv6: o.IPv6})
	if err != nil {
		return nil, err
	}
	l := &Lab{Prefix: o.Prefix, Topology: o.Topology, Options: o, net: tn}
	if err := l.build(); err != nil {
		return nil, err
	}
	return l, nil
}

// New builds a lab for a test or benchmark and closes it in t.Cleanup.
// It skips t when not running as root and fails t if the lab cannot be
// built.
func New(t testing.TB, opts Options) *Lab {
	t.Helper()
	testnet.RequireRoot(t)
	l, err := Start(opts)
	if err != nil {
		t.Fatalf("lab: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("lab: close: %v", err)
		}
	})
	return l
}

// Close stops the backend servers and removes every namespace the lab
// created (their links go with them). It is idempotent. Processes started
// with Host.Command keep their namespace alive (nameless) until they exit:
// stop them first.
func (l *Lab) Close() error { return l.net.Close() }

// AddClientAddresses gives the first client n further addresses on its
// eth0, testnet.ClientExtraIP(0 … n-1) (1 ≤ n ≤
// testnet.MaxClientExtraIPs), and returns them: one namespace whose
// connections leave from n client addresses (loadgen.Config.Sources),
// each with TCP timestamps of its own, as from n clients. They go with
// the lab.
func (l *Lab) AddClientAddresses(n int) ([]netip.Addr, error) {
	if n < 1 || n > testnet.MaxClientExtraIPs {
		return nil, fmt.Errorf("lab: %d client addresses, want 1…%d", n, testnet.MaxClientExtraIPs)
	}
	addrs := make([]netip.Addr, n)
	for i := range addrs {
		addrs[i] = testnet.ClientExtraIP(i)
		if err := l.Client().AddAddress("eth0", netip.PrefixFrom(addrs[i], testnet.FrontNet.Bits())); err != nil {
			return nil, err
		}
	}
	return addrs, nil
}

// AddXLBAddresses gives XLB's eth0 further addresses,
// testnet.XLBExtraIP(0 … n-1) (1 ≤ n ≤ testnet.MaxExtraIPs), and returns
// them: the listen addresses of further services (issue 29) or further
// SNAT addresses (issue 13). They go with the lab.
func (l *Lab) AddXLBAddresses(n int) ([]netip.Addr, error) {
	if n < 1 || n > testnet.MaxExtraIPs {
		return nil, fmt.Errorf("lab: %d XLB addresses, want 1…%d", n, testnet.MaxExtraIPs)
	}
	addrs := make([]netip.Addr, n)
	for i := range addrs {
		addrs[i] = testnet.XLBExtraIP(i)
		if err := l.XLB.AddAddress("eth0", netip.PrefixFrom(addrs[i], testnet.FrontNet.Bits())); err != nil {
			return nil, err
		}
	}
	return addrs, nil
}
