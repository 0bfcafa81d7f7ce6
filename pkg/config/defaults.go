package config

import (
	"net/netip"
	"slices"
	"time"

	"github.com/xlbproject/xlb/pkg/limits"
)

// Defaults and limits. DESIGN §1 fixes the defaults; where it leaves a limit
// open the value here is this package's decision, documented next to it.
// Limits the data path is built with come from bpf/layout.h through
// pkg/limits, their single source; so do the orphan and embryonic TTLs'
// defaults, which the maintenance loop shares.
const (
	DefaultName            = "xlb"
	DefaultProto           = ProtoTCP
	DefaultMode            = ModeNAT
	DefaultOrphanTTL       = limits.DefaultOrphanTTL // DESIGN §1, seed "Inactive connection cleanup"
	DefaultShutdownTimeout = 15 * time.Second        // DESIGN §1, seed "XLB shutdown behavior"
	DefaultAdminPort       = 8642                    // issue 16: not 9090 (Prometheus, Cockpit) nor 9091..9999 (the Prometheus wiki's exporter ports)
	DefaultMetricsPort     = 9642
	DefaultXDPMode         = XDPModeAuto
	DefaultSNATPortLo      = 40000
	DefaultSNATPortHi      = 59999
	DefaultMaxConnections  = uint32(limits.DefaultMaxConnections) // 262144 pairs
	DefaultEmbryonicTTL    = limits.DefaultEmbryonicTTL           // 10 s: DESIGN §6b, issue 13
	// DefaultUDPTimeout and DefaultUDPStreamTimeout are conntrack's two
	// UDP timeouts (issue 31), from bpf/layout.h through pkg/limits.
	DefaultUDPTimeout       = limits.DefaultUdpTimeoutSecs * time.Second       // 30 s
	DefaultUDPStreamTimeout = limits.DefaultUdpStreamTimeoutSecs * time.Second // 120 s
	DefaultStateDir         = "/sys/fs/bpf/xlb"
	// DefaultAdminSocket is the admin unix socket (issue 28), in the
	// unit's RuntimeDirectory (/run/xlb, mode 0700, kept across restarts).
	DefaultAdminSocket = "/run/xlb/admin.sock"
	// MaxAdminSocketLen is the longest path a unix socket address holds
	// (sun_path is 108 bytes with its terminating NUL).
	MaxAdminSocketLen = 107

	// MinOrphanTTL is the effective minimum of orphan_ttl_secs; lower
	// values become this with one warning (seed "Inactive connection
	// cleanup").
	MinOrphanTTL = 300 * time.Second
	// MaxOrphanTTL (seven days) keeps an idle pair's age within what a
	// flow entry's 32-bit last-seen time measures exactly: 2^31 ticks,
	// 20.7 days at the fastest tick rate Linux is built with, 1200 Hz
	// (pkg/dataplane hz.go; bpf/layout.h struct flow_value).
	MaxOrphanTTL = 7 * 24 * time.Hour
	// MinEmbryonicTTL is the floor of flow_table.embryonic_ttl_secs (its
	// ceiling is the effective orphan_ttl_secs: an embryonic pair never
	// outlives an idle one). One second is the unit of the field; the
	// maintenance loop removes expired pairs within a cycle (1 s) of it.
	MinEmbryonicTTL = time.Second
	// MinUDPTimeout and MaxUDPTimeout bound flow_table.udp_timeout_secs
	// and udp_stream_timeout_secs: one second is the field's unit (the
	// loop removes a pair within a cycle of its deadline), seven days
	// MaxOrphanTTL's bound on what a flow entry's last-seen time measures.
	MinUDPTimeout = time.Second
	MaxUDPTimeout = MaxOrphanTTL
	// MaxShutdownTimeout (one hour) bounds how long a stop may hold the
	// instance attached; the service manager's stop timeout must exceed it.
	MaxShutdownTimeout = time.Hour

	// MinPortMappings and MaxPortMappings bound len(ports) (DESIGN §1);
	// the data path holds 8 mappings per listen address.
	MinPortMappings = 1
	MaxPortMappings = limits.MaxPorts

	// MaxSNATAddrs bounds the addresses snat.ip lists: the data path's
	// config holds that many SNAT addresses (bpf/layout.h).
	MaxSNATAddrs = limits.MaxSNATIPs

	// MinSNATPort is the floor of snat.port_range: ports below 1024 are
	// well-known service ports that host daemons bind, so the range must
	// stay clear of them.
	MinSNATPort = 1024

	// PrivilegedPortEnd is the first port a process binds without
	// CAP_NET_BIND_SERVICE (Linux's net.ipv4.ip_unprivileged_port_start
	// default). The packaged unit does not grant that capability, so an
	// admin or metrics port below it is a warning.
	PrivilegedPortEnd = 1024

	// MaxFlowConnections (2^24 pairs, 2^25 map entries) is the ceiling of
	// flow_table.max_connections: beyond it the preallocated flow map needs
	// several GiB of locked kernel memory.
	MaxFlowConnections = 1 << 24

	// MaxNameLen bounds name and backend names, which label metrics and
	// status; long enough for any Kubernetes object name (253).
	MaxNameLen = 253

	// MaxBackends bounds len(provider.static.backends): the data path has
	// 1024 backend ids and holds at most that many routable backends
	// (bpf/layout.h XLB_MAX_BACKENDS).
	MaxBackends = limits.MaxBackends

	// MaxServices bounds len(services) (DESIGN §9): the data path's
	// service ids, serving and draining services together
	// (bpf/layout.h XLB_MAX_SERVICES).
	MaxServices = limits.MaxServices
	// MaxMembers bounds the static backends of all services together:
	// the data path's member ids, one per (service, backend address)
	// (bpf/layout.h XLB_MAX_MEMBERS).
	MaxMembers = limits.MaxMembers

	// MaxInterfaceName is the longest Linux interface name (IFNAMSIZ-1).
	MaxInterfaceName = 15
	// MaxInterfaces bounds len(interfaces): the data path's redirect map
	// (xlb_tx_ports) holds 64 interfaces.
	MaxInterfaces = limits.MaxInterfaces
)

// Values of the enumerated fields.
const (
	ProtoTCP = "tcp"
	ProtoUDP = "udp"

	ModeNAT = "nat"
	ModeDSR = "dsr"

	// xdp_mode: the data path's attach modes (pkg/dataplane's Mode).
	XDPModeAuto    = limits.XDPModeAuto
	XDPModeNative  = limits.XDPModeNative
	XDPModeGeneric = limits.XDPModeGeneric
)

// DefaultAdminAllowedHosts are the Host header values the admin HTTP
// listener accepts besides the address a request arrived on (issue 28):
// the loopback names a local client uses.
var DefaultAdminAllowedHosts = []string{"localhost", "127.0.0.1", "::1"}

// Default returns a Config with every default of DESIGN §1 filled in. Ports
// and Provider have no default, so the result is not a valid configuration
// by itself; Parse starts from it and overlays the file.
func Default() *Config {
	return &Config{
		Name:            DefaultName,
		Listen:          Listen{Auto: true},
		Proto:           DefaultProto,
		Mode:            DefaultMode,
		OrphanTTL:       DefaultOrphanTTL,
		ShutdownTimeout: DefaultShutdownTimeout,
		Admin: Admin{
			Address:      netip.AddrFrom4([4]byte{127, 0, 0, 1}),
			Port:         DefaultAdminPort,
			Socket:       DefaultAdminSocket,
			AllowedHosts: slices.Clone(DefaultAdminAllowedHosts),
		},
		Metrics: Metrics{
			Listener: Listener{
				Address: netip.IPv4Unspecified(),
				Port:    DefaultMetricsPort,
			},
			PerBackend: true,
		},
		XDPMode: DefaultXDPMode,
		SNAT: SNAT{
			Auto:   true,
			PortLo: DefaultSNATPortLo,
			PortHi: DefaultSNATPortHi,
		},
		FlowTable: FlowTable{
			MaxConnections:   DefaultMaxConnections,
			EmbryonicTTL:     DefaultEmbryonicTTL,
			UDPTimeout:       DefaultUDPTimeout,
			UDPStreamTimeout: DefaultUDPStreamTimeout,
		},
		StateDir: DefaultStateDir,
	}
}
