package instance

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/xlbproject/xlb/pkg/backend"
	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/dataplane"
)

// Service is one service of a running instance (DESIGN §9): its data-path
// id and record, its config (nil for a draining service, which a reload
// removed while its pairs live) and its backend manager.
type Service struct {
	ID       uint16
	Name     string
	Draining bool
	Listen   netip.Addr
	Proto    string
	Ports    []config.PortMapping
	// Config is the service's config; nil while draining.
	Config   *config.Service
	Backends *backend.Manager
}

// placedService is a service as the data path placed it: its id and
// record, and its config unless it drains.
type placedService struct {
	ID       uint16
	Name     string
	Draining bool
	Listen   netip.Addr
	Proto    string
	Ports    []config.PortMapping
	config   *config.Service
}

// configure writes the services and the SNAT space to the data path and
// returns where it placed each service: the config's in its order, then
// the draining ones.
func (in *Instance) configure(svcs []config.Service) ([]placedService, error) {
	c, r := in.Config, in.Resolved
	if len(svcs) > 1 {
		return nil, fmt.Errorf("services: %d services, and this data path (layout 8) balances one", len(svcs))
	}
	s := svcs[0]
	settings := dataplane.Settings{Listen: r.Services[0].Listen, SNAT: r.SNAT, SNATPortLo: c.SNAT.PortLo, SNATPortHi: c.SNAT.PortHi}
	for _, p := range s.Ports {
		settings.Ports = append(settings.Ports, dataplane.PortMap{Local: p.LocalPort, Remote: p.RemotePort})
	}
	if err := in.DP.Configure(settings); err != nil {
		return nil, err
	}
	return []placedService{{ID: 0, Name: s.Name, Listen: settings.Listen, Proto: s.Proto, Ports: slices.Clone(s.Ports), config: &svcs[0]}}, nil
}

// routable is the routable set the data path holds for service svc.
func (in *Instance) routable(svc uint16) ([]backend.Ref, error) {
	refs, err := in.DP.Routable()
	if err != nil {
		return nil, err
	}
	out := make([]backend.Ref, 0, len(refs))
	for _, r := range refs {
		out = append(out, backend.Ref{ID: r.ID, Member: r.ID, IP: r.IP, Port: r.Port})
	}
	return out, nil
}

// migratedService names the service a predecessor's backends without a
// service belong to: the only service, else the first.
func migratedService(c *config.Config, placed []placedService) string {
	return placed[0].Name
}

// adoptedMembers are the members the adopted pairs and routable sets
// reference, without names.
func adoptedMembers(ad dataplane.Adoption, placed []placedService, migrated string) []backend.Known {
	var out []backend.Known
	for id, ip := range ad.Backends {
		out = append(out, backend.Known{ID: id, Backend: id, Service: migrated, IP: ip})
	}
	return out
}

// dpPublisher is the backend managers' backend.Publisher over the data
// path.
type dpPublisher struct{ dp *dataplane.Dataplane }

func (p dpPublisher) SetRoutable(svc uint16, refs []backend.Ref) error {
	if svc != 0 {
		return fmt.Errorf("dataplane: no service %d", svc)
	}
	out := make([]dataplane.BackendRef, 0, len(refs))
	for _, r := range refs {
		out = append(out, dataplane.BackendRef{ID: r.ID, IP: r.IP, Port: r.Port})
	}
	return p.dp.SetRoutable(out)
}

func (p dpPublisher) ResetBackend(id uint32) error { return p.dp.ResetBackend(id) }

// ResetMember clears the counter cells, which layout 8 keys by backend
// id.
func (p dpPublisher) ResetMember(id uint32) error { return p.dp.ResetBackend(id) }
