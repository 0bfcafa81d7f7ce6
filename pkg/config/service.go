package config

// Service is one balanced service (DESIGN §9): a listen address, a
// protocol and its port mappings, with its own backends, scheduler and
// health check. A file gives either the top-level form of DESIGN §1
// (one service, named after Config.Name) or a `services:` list, never
// both; after Parse, Config.Services holds one entry per service in the
// file's order either way.
type Service struct {
	// Name is unique in the file, [a-z0-9][a-z0-9_-]{0,31}: the `service`
	// label in metrics and the key a reload matches services by. In the
	// top-level form it is Config.Name.
	Name string

	// Listen is the service's address (DESIGN §9): an address of this
	// host or one routed to it; auto for at most one service.
	Listen Listen

	// Proto is "tcp" or "udp" (issue 31).
	Proto string

	// Ports are the service's 1..MaxPortMappings port mappings, local
	// ports unique within the service; (Listen, Proto, LocalPort) is
	// unique across services.
	Ports []PortMapping

	// Scheduler picks a backend for a new connection: "round_robin" (the
	// default, the seed's rule), "weighted_round_robin" or "maglev".
	Scheduler string

	// Maglev is the maglev scheduler's settings; nil unless the file
	// gives a `maglev:` key (only with scheduler maglev).
	Maglev *Maglev

	// Provider is the source of the service's backends.
	Provider Provider

	// HealthCheck is the active health check of the service's backends;
	// nil: none.
	HealthCheck *HealthCheck

	// UDPUnrepliedMax caps the service's UDP pairs that saw no reply yet
	// (a spoofed flood cannot fill the table TCP needs; issue 31); 0 for
	// TCP services and when the file leaves the default (a quarter of
	// flow_table.max_connections; Config.UDPUnrepliedMax resolves it).
	// YAML "udp_unreplied_max", a service key in both forms;
	// 1..flow_table.max_connections; proto udp only.
	UDPUnrepliedMax uint32
}

// UDPUnrepliedMax is the effective udp_unreplied_max of s, one of c's
// services: its own, else max(1, flow_table.max_connections/4); 0 for a
// service that is not proto udp.
func (c *Config) UDPUnrepliedMax(s *Service) uint32 {
	switch {
	case s.Proto != ProtoUDP:
		return 0
	case s.UDPUnrepliedMax != 0:
		return s.UDPUnrepliedMax
	}
	return max(1, c.FlowTable.MaxConnections/4)
}

// Maglev is a service's `maglev:` section (DESIGN §9).
type Maglev struct {
	// Hash is MaglevHashFiveTuple (the default) or MaglevHashClientIP.
	Hash string
	// TableSize is the lookup table's size, a prime (pkg/sched
	// ValidMaglevSize); 0: chosen from the backends (Service.TableSize).
	TableSize uint32
}

// Maglev hashes (DESIGN §9 maglev.hash).
const (
	MaglevHashFiveTuple = "five_tuple"
	MaglevHashClientIP  = "client_ip"
)

// Form is the shape of the file a Config came from.
type Form int

const (
	// FormTopLevel is DESIGN §1's form: listen, proto, ports, provider
	// and health_check at the top level, one service named after name.
	FormTopLevel Form = iota
	// FormServices is DESIGN §9's form: a `services:` list.
	FormServices
)

// ServiceList returns c.Services, or, for a Config without them (built
// by hand, or a top-level file being decoded), the one service its
// top-level fields describe.
func (c *Config) ServiceList() []Service {
	if len(c.Services) > 0 {
		return c.Services
	}
	return []Service{{
		Name:        c.Name,
		Listen:      c.Listen,
		Proto:       c.Proto,
		Ports:       c.Ports,
		Scheduler:   SchedulerRoundRobin,
		Provider:    c.Provider,
		HealthCheck: c.HealthCheck,
	}}
}

// Schedulers (DESIGN §9 scheduler; docs/schedulers.md).
const (
	SchedulerRoundRobin         = "round_robin"
	SchedulerWeightedRoundRobin = "weighted_round_robin"
	SchedulerMaglev             = "maglev"
)
