package lab

import (
	"errors"
	"net/netip"
	"os"
	"sync"
	"testing"
)

// Lab is a built topology. Fields are read-only after Start returns.
type Lab struct {
	Prefix   string
	Topology Topology
	Options  Options // with defaults filled in

	Clients  []*Host    // Clients[0] is Client()
	XLB      *Host      // eth0 (and eth1 in TwoArm); no XDP program attached
	Backends []*Backend // in address order
	LANs     []*Host    // bridge namespaces: [lan] or [lan-front, lan-back]

	hosts []*Host // every namespace created, in creation order

	closeOnce sync.Once
	closeErr  error
}

// Backend is a backend host with its echo and sink servers (nil when
// disabled in Options).
type Backend struct {
	*Host
	Echo *Server
	Sink *Server
}

// Client is the first client.
func (l *Lab) Client() *Host { return l.Clients[0] }

// Hosts returns every namespace of the lab: bridge namespaces, clients,
// XLB, backends.
func (l *Lab) Hosts() []*Host { return append([]*Host(nil), l.hosts...) }

// EchoAddr is "IP:port" of backend i's echo server (i counts from 0), or
// "" when the echo server is disabled.
func (l *Lab) EchoAddr(i int) string { return serverAddr(l.Backends[i], l.Backends[i].Echo) }

// SinkAddr is "IP:port" of backend i's sink server (i counts from 0), or
// "" when the sink server is disabled.
func (l *Lab) SinkAddr(i int) string { return serverAddr(l.Backends[i], l.Backends[i].Sink) }

func serverAddr(b *Backend, s *Server) string {
	if s == nil {
		return ""
	}
	return netip.AddrPortFrom(b.IP(), s.Addr().Port()).String()
}

// Stats merges the statistics of the backend's echo and sink servers
// (Conns: echo's first, then sink's).
func (b *Backend) Stats() Stats {
	st := Stats{Remotes: map[netip.Addr]int{}}
	for _, s := range []*Server{b.Echo, b.Sink} {
		if s == nil {
			continue
		}
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
	for _, s := range []*Server{b.Echo, b.Sink} {
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
	l := &Lab{Prefix: o.Prefix, Topology: o.Topology, Options: o}
	if err := l.build(); err != nil {
		return nil, errors.Join(err, l.Close())
	}
	return l, nil
}

// New builds a lab for a test or benchmark and closes it in t.Cleanup.
// It skips t when not running as root and fails t if the lab cannot be
// built.
func New(t testing.TB, opts Options) *Lab {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("lab: needs root (network namespaces, veth, XDP); run the tests as root")
	}
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
