package instance

import (
	"context"
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
	Config *config.Service
	// Maglev is Config's maglev section with its default resolved (hash
	// five_tuple, the table size of maglevSettings); nil unless the
	// scheduler is maglev.
	Maglev   *config.Maglev
	Backends *backend.Manager

	// UDPUnrepliedMax is a UDP service's udp_unreplied_max as the data
	// path holds it (resolved: config.Config.UDPUnrepliedMax); 0 for a TCP service and
	// while draining.
	UDPUnrepliedMax uint32

	stop context.CancelFunc // stops the manager (FreeService)
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
	Migrated bool // layout 8's one service (dataplane.ServiceRef.Migrated)
	config   *config.Service
}

// configure writes the services and the SNAT space to the data path and
// returns where it placed each service: the config's in its order, then
// the draining ones (a previous config's, whose pairs live). Services
// keep their ids by name across reloads (dataplane.Configure).
func (in *Instance) configure(svcs []config.Service) ([]placedService, error) {
	c, r := in.Config, in.Resolved
	settings := dataplane.Settings{SNAT: r.SNAT, SNATPortLo: c.SNAT.PortLo, SNATPortHi: c.SNAT.PortHi}
	for i, s := range svcs {
		ss := dataplane.ServiceSettings{Name: s.Name, Listen: r.Services[i].Listen, Proto: s.Proto, Scheduler: s.Scheduler,
			UDPUnrepliedMax: c.UDPUnrepliedMax(&s)}
		if mg := maglevSettings(s); mg != nil {
			ss.MaglevHash, ss.TableSize = mg.Hash, mg.TableSize
		}
		for _, p := range s.Ports {
			ss.Ports = append(ss.Ports, dataplane.PortMap{Local: p.LocalPort, Remote: p.RemotePort})
		}
		settings.Services = append(settings.Services, ss)
	}
	refs, err := in.DP.Configure(settings)
	if err != nil {
		return nil, err
	}
	out := make([]placedService, 0, len(refs))
	for i, ref := range refs {
		ps := placedService{ID: ref.ID, Name: ref.Name, Draining: ref.State == dataplane.ServiceDraining,
			Listen: ref.Listen, Proto: ref.Proto, Migrated: ref.Migrated}
		for _, p := range ref.Ports {
			ps.Ports = append(ps.Ports, config.PortMapping{LocalPort: p.Local, RemotePort: p.Remote})
		}
		if i < len(svcs) {
			ps.config = &svcs[i]
		}
		if ps.Name == "" {
			// a layout-8 record no Configure named (it drains)
			ps.Name = fmt.Sprintf("service-%d", ps.ID)
		}
		out = append(out, ps)
	}
	return out, nil
}

// hasUDP reports whether a service of svcs is UDP: the SNAT bitmaps then
// hold a UDP half (dataplane.SNATSpace.UDP; issue 31).
func hasUDP(svcs []config.Service) bool {
	return slices.ContainsFunc(svcs, func(s config.Service) bool { return s.Proto == dataplane.ProtoUDP })
}

// maglevSettings is service s's maglev section with its defaults
// resolved (config.Service MaglevHash and TableSize: the size never
// depends on how many backends are routable); nil unless the scheduler is
// maglev.
func maglevSettings(s config.Service) *config.Maglev {
	if s.Scheduler != config.SchedulerMaglev {
		return nil
	}
	return &config.Maglev{Hash: s.MaglevHash(), TableSize: s.TableSize()}
}

// routable is the routable set the data path holds for service svc.
func (in *Instance) routable(svc uint16) ([]backend.Ref, error) { return in.DP.Routable(svc) }

// migratedService names the service a predecessor's backends without a
// service belong to (a layout-8 predecessor's hand-off): the service the
// migration made of layout 8's one service, else the first.
func migratedService(placed []placedService) string {
	for _, p := range placed {
		if p.Migrated {
			return p.Name
		}
	}
	return placed[0].Name
}

// adoptedMembers are the members the adopted pairs and routable sets
// reference, without names.
func adoptedMembers(ad dataplane.Adoption, placed []placedService) []backend.Known {
	names := map[uint16]string{}
	for _, p := range placed {
		names[p.ID] = p.Name
	}
	var out []backend.Known
	for id, m := range ad.Members {
		name, ok := names[m.Service]
		if !ok {
			continue // a service freed meanwhile: nothing of it lives
		}
		out = append(out, backend.Known{ID: id, Backend: m.Backend, Service: name, IP: m.IP})
	}
	return out
}

// The backend managers publish to the data path itself.
var _ backend.Publisher = (*dataplane.Dataplane)(nil)
