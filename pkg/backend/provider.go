// Package backend discovers backends, gives each a stable data-path id,
// resolves its route and neighbour through netlink and publishes the
// routable set to the data path (DESIGN §8: config → providers → dataplane).
package backend

import (
	"context"
	"net/netip"

	"github.com/xlbproject/xlb/pkg/config"
)

// Backend is one discovered backend: a name for status and metrics and its
// IPv4 address. Backends are reached on the port mapping's remote_port.
type Backend struct {
	Name string
	IP   netip.Addr
}

// Provider discovers backends (seed "Backend changes": discovery controls
// eligibility for new connections only).
type Provider interface {
	// Name identifies the provider in logs and status ("static", "kubernetes").
	Name() string
	// Run sends the complete current set on every change until ctx ends;
	// the first send is the initial sync. It returns ctx.Err() on shutdown.
	Run(ctx context.Context, updates chan<- []Backend) error
}

// Static is the provider for provider.static in xlb.yaml: the list is read
// once at startup (seed: changing xlb.yaml requires a restart).
type Static struct {
	backends []Backend
}

// NewStatic returns a provider serving the configured list, in file order.
func NewStatic(bs []config.Backend) *Static {
	s := &Static{}
	for _, b := range bs {
		s.backends = append(s.backends, Backend{Name: b.Name, IP: b.IP})
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
