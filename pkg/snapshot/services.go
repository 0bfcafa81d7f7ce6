package snapshot

import (
	"net/netip"

	"github.com/xlbproject/xlb/pkg/backend"
	"github.com/xlbproject/xlb/pkg/config"
)

// ServiceState is a service's place in the data path (DESIGN §9).
type ServiceState string

const (
	// ServiceServing: in the config; new connections to it are balanced.
	ServiceServing ServiceState = "serving"
	// ServiceDraining: removed by a reload (or a config a restart no
	// longer has) while pairs of it live: those keep flowing until they
	// end, new connections to it pass to the kernel.
	ServiceDraining ServiceState = "draining"
)

// Service is one service as the daemon last published it (DESIGN §9).
type Service struct {
	ID        uint16 // the data path's service id (flow entries carry it)
	Name      string
	State     ServiceState
	Listen    netip.Addr
	Proto     string
	Ports     []config.PortMapping
	Scheduler string

	Provider       string // "static", "kubernetes"
	ProviderError  string // the provider's latest error; "" while it is healthy
	ProviderSynced bool   // the provider delivered its first set
	ProviderStale  bool   // the provider lost its source and keeps its last set

	// Backends are the service's backends; backend.Status.ID is the
	// member id (per service and backend address) that keys the
	// per-backend counters.
	Backends []backend.Status
}
