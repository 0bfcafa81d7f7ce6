// Package backend discovers backends, gives each a stable data-path id,
// resolves its route and neighbour through netlink and publishes the
// routable set to the data path (DESIGN §8: config → providers → dataplane).
package backend

import (
	"context"
	"net/netip"

	"github.com/xlbproject/xlb/pkg/config"
)

// Backend is one discovered backend: a name for status and metrics, its
// IPv4 address and, from providers that know it, its port. Backends are
// reached on the port mapping's remote_port; a mapping without one
// (config.PortMapping.RemotePort 0, provider.kubernetes only) uses Port.
type Backend struct {
	Name string
	IP   netip.Addr
	// Port is the backend's own port (the EndpointSlice port named
	// provider.kubernetes.port_name); 0 when the provider has none.
	Port uint16
	// Weight is the backend's share of new connections under the table
	// schedulers, 0..256: 0 takes no new connections (a Kubernetes
	// weight annotation), a provider without weights gives 1.
	Weight uint16
}

// Provider discovers backends (seed "Backend changes": discovery controls
// eligibility for new connections only).
type Provider interface {
	// Name identifies the provider in logs and status ("static", "kubernetes").
	Name() string
	// Run sends the complete set of backends eligible for new
	// connections on every change until ctx ends; the first send is the
	// initial sync. A backend that leaves the set (gone, or no longer
	// eligible) is departed: its pairs stay pinned to it. It returns
	// ctx.Err() on shutdown.
	Run(ctx context.Context, updates chan<- []Backend) error
}

// Reporter is implemented by providers that keep serving their last set
// while their source fails (kubernetes: the API server is unreachable).
type Reporter interface {
	// LastError is the source's latest error; nil once a later sync
	// succeeded.
	LastError() error
}

// Static is the provider for provider.static in xlb.yaml: the list is read
// once at startup (seed: changing xlb.yaml requires a restart).
type Static struct {
	backends []Backend
}

// NewStatic returns a provider serving the configured list, in file order,
// with the configured weights (config.Backend.Weight; 0, not given,
// is the default 1).
func NewStatic(bs []config.Backend) *Static {
	s := &Static{}
	for _, b := range bs {
		w := b.Weight
		if w == 0 {
			w = 1
		}
		s.backends = append(s.backends, Backend{Name: b.Name, IP: b.IP, Weight: w})
	}
	return s
}

// Name implements Provider.
func (s *Static) Name() string { return "static" }

// Run implements Provider: one send, then wait for shutdown.
func (s *Static) Run(ctx context.Context, updates chan<- []Backend) error {
	set := append([]Backend(nil), s.backends...)
	select {
	case updates <- set:
	case <-ctx.Done():
		return ctx.Err()
	}
	<-ctx.Done()
	return ctx.Err()
}
