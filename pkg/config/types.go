package config

import (
	"net/netip"
	"time"
)

// Config is the effective content of xlb.yaml (DESIGN §1): every field holds
// either the value from the file or its default. Ports and Provider have no
// default and must come from the file.
type Config struct {
	// Name is the service name shown in the status API and metrics.
	// YAML "name"; default "xlb" (DESIGN §1).
	Name string

	// Form is the file's shape: the top-level form (one service) or a
	// services: list (DESIGN §9).
	Form Form

	// Services are the balanced services, in the file's order; at least
	// one after Parse. In the top-level form it is the one service the
	// top-level fields below describe, named after Name. Consumers read
	// Services (or ServiceList); the top-level Listen, Proto, Ports,
	// Provider and HealthCheck are set only in the top-level form, for
	// printing that form back.
	Services []Service

	// Listen is the virtual address clients connect to. YAML "listen":
	// "auto" or {ip: A.B.C.D}; default auto (DESIGN §1).
	Listen Listen

	// Proto is the balanced transport protocol. YAML "proto": "tcp" or
	// "udp" (issue 31); default "tcp".
	Proto string

	// Mode is the forwarding mode. YAML "mode"; default "nat". "dsr" is
	// rejected until implemented (DESIGN §1).
	Mode string

	// Ports are the 1..MaxPortMappings port mappings; clients connect to
	// Listen:LocalPort and backends are reached on RemotePort (DESIGN §1).
	Ports []PortMapping

	// Provider is the source of backends; exactly one of its fields is set
	// (DESIGN §1).
	Provider Provider

	// HealthCheck is the active health check every backend gets (DESIGN
	// §6b, issue 14). YAML "health_check"; nil when the file omits it:
	// no active checks.
	HealthCheck *HealthCheck

	// OrphanTTL is how long an idle connection pair that never closed or
	// reset is kept. YAML "orphan_ttl_secs" (whole seconds); default 300 s.
	// Values below 300 s become 300 s with one warning, never an error
	// (seed "Inactive connection cleanup"). Ceiling: MaxOrphanTTL.
	OrphanTTL time.Duration

	// ShutdownTimeout is the reactive-RST grace period after SIGTERM/SIGINT
	// (seed "XLB shutdown behavior"). YAML "shutdown_timeout" (whole
	// seconds); default 15 s; 0 means no grace; negative is rejected.
	// Ceiling: MaxShutdownTimeout.
	ShutdownTimeout time.Duration

	// Admin is the listener for health, readiness, the status API and the
	// console. YAML "admin"; default 127.0.0.1:8642 (DESIGN §1, §3; until
	// issue 16 it was 9090, which Prometheus and Cockpit use).
	Admin Admin

	// Metrics is the Prometheus listener and the series it exports. YAML
	// "metrics"; default 0.0.0.0:9642 with the per-backend series
	// (DESIGN §1, §4).
	Metrics Metrics

	// Interfaces are the network interfaces XDP attaches to. YAML
	// "interfaces"; default empty, meaning the interface that owns the
	// listen address, which pkg/instance resolves at runtime (DESIGN §1).
	Interfaces []string

	// XDPMode is "auto" (native, falling back to generic with a warning),
	// "native" or "generic" (exactly that or fail). YAML "xdp_mode";
	// default "auto" (DESIGN §1).
	XDPMode string

	// SNAT is the backend-facing source address and port range (DESIGN §1).
	SNAT SNAT

	// FlowTable sizes the connection table (DESIGN §1).
	FlowTable FlowTable

	// StateDir is the absolute directory for pinned maps and the link
	// (hot upgrade, crash survival). YAML "state_dir"; default
	// /sys/fs/bpf/xlb (DESIGN §1, §6). Stored cleaned (filepath.Clean).
	// This version validates it and pins nothing there yet: the hot
	// upgrade ("Hot upgrade and crash survival") is its first user.
	StateDir string

	// BGP is the embedded BGP speaker that announces the listen address
	// while the instance is ready and not drained (DESIGN §6a, issue 15).
	// YAML "bgp"; nil when the file omits it: no speaker.
	BGP *BGP
}

// Listen is the address clients connect to (DESIGN §1).
type Listen struct {
	// Auto means "the primary IPv4 address of the default-route
	// interface", resolved at runtime. When Auto is set, IP is invalid.
	Auto bool
	// IP is the explicit IPv4 listen address when Auto is false.
	IP netip.Addr
}

// PortMapping maps a client-facing port to a backend port (DESIGN §1).
type PortMapping struct {
	// LocalPort is the port clients connect to on the listen address,
	// 1..65535, unique across mappings.
	LocalPort uint16
	// RemotePort is the backend port, 1..65535. When the file omits it,
	// it is LocalPort with provider.static, and 0 with
	// provider.kubernetes: 0 means "each backend's own port", the
	// EndpointSlice port named provider.kubernetes.port_name (issue 14).
	RemotePort uint16
}

// Provider is the source of backends: exactly one field is non-nil
// (DESIGN §1).
type Provider struct {
	// Static is a fixed backend list, read once at startup.
	Static *StaticProvider
	// Kubernetes discovers backends from a Service's EndpointSlices.
	Kubernetes *KubernetesProvider
}

// StaticProvider is a fixed list of backends (DESIGN §1). It holds at least
// one backend; IPs and names are unique.
type StaticProvider struct {
	Backends []Backend
}

// Backend is one static backend (DESIGN §1).
type Backend struct {
	// Name labels the backend in status and metrics; defaults to the IP
	// string when omitted from the file.
	Name string
	// IP is the backend's IPv4 address: not unspecified, loopback,
	// multicast, broadcast, or the listen address.
	IP netip.Addr
	// Weight is the backend's share of new connections under
	// weighted_round_robin and maglev, 1..256 (default 1; DESIGN §9).
	Weight uint16
}

// KubernetesProvider names the Service whose EndpointSlices supply the
// backends (DESIGN §1, §6b; pkg/backend/kubernetes watches them).
type KubernetesProvider struct {
	// Namespace is the Service's namespace (a DNS-1123 label).
	Namespace string
	// Service is the Service name (a DNS-1035 label).
	Service string
	// Kubeconfig is a kubeconfig file path; empty means in-cluster
	// configuration. A relative path is relative to the daemon's working
	// directory.
	Kubeconfig string
	// PortName is the name of the EndpointSlice port (protocol TCP) the
	// backends are reached on: a slice without a TCP port of that name
	// supplies no backend, and a port mapping without remote_port uses
	// that port's number. YAML "port_name"; default "", the unnamed port
	// of a one-port Service. Empty or a DNS-1123 label, as Kubernetes
	// requires of Service port names.
	PortName string
}

// Listener is a TCP listening address (DESIGN §1).
type Listener struct {
	// Address is the IP address to bind (IPv4 or IPv6; unspecified binds
	// all addresses).
	Address netip.Addr
	// Port is the TCP port, 1..65535.
	Port uint16
	// WebConfigFile is the absolute path of a Prometheus exporter-toolkit
	// web configuration file (TLS, bcrypt basic_auth_users) for this
	// listener; "" serves plain HTTP without auth. YAML "web_config_file";
	// pkg/weblisten reads and checks the file (issue 16).
	WebConfigFile string
}

// Metrics is the metrics listener and which series it exports (DESIGN
// §4; issue 28 item 9).
type Metrics struct {
	Listener
	// PerBackend exports the series with a backend label: xlb_backend_state,
	// the traffic series (xlb_backend_connections_*, xlb_backend_*_bytes_total,
	// xlb_backend_*_packets_total), xlb_backend_handshake_seconds and, with
	// health checks, xlb_backend_health_checks_total, and
	// xlb_backend_tcp_timestamps (docs/observability.md counts the series
	// per backend name). false leaves them
	// out; the instance's totals (xlb_backends{state}, xlb_connections_*,
	// xlb_sent_bytes_total and the other traffic totals,
	// xlb_handshake_seconds) stay. YAML "per_backend"; default true.
	PerBackend bool
}

// Admin is the admin listener and its optional basic authentication
// (DESIGN §1, §3).
type Admin struct {
	Address netip.Addr
	Port    uint16
	// WebConfigFile is the listener's exporter-toolkit web configuration
	// file, as Listener.WebConfigFile; its basic_auth_users and Auth are
	// two sources of users and cannot both be set (pkg/weblisten).
	WebConfigFile string
	// Auth, when set, enables basic authentication. The password comes
	// only from the environment variable XLB_ADMIN_PASSWORD, never from the
	// file; pkg/status (not this package) fails the daemon's startup when
	// it is empty.
	Auth *AdminAuth
	// Socket is the absolute path of the admin unix socket (issue 28):
	// every route of the admin API, and the only place where a
	// state-changing request (drain, undrain) needs no credentials. The
	// daemon creates it mode 0600, owned by its user (root), and xlbctl
	// uses it by default. YAML "socket"; default DefaultAdminSocket; at
	// most MaxAdminSocketLen bytes (sockaddr_un).
	Socket string
	// AllowedHosts are the host names and addresses (no port) that the
	// Host header of a request to the HTTP listener may name besides the
	// address the request arrived on (issue 28: a DNS-rebinding page
	// names its own host, which is refused). Lower case, unique. YAML
	// "allowed_hosts"; default DefaultAdminAllowedHosts.
	AllowedHosts []string
}

// AdminAuth is the admin basic-authentication user (DESIGN §1).
type AdminAuth struct {
	// Username is non-empty and contains no ':' (basic-auth syntax).
	Username string
}

// SNAT is the backend-facing source addresses and port range (DESIGN §1,
// §6b).
type SNAT struct {
	// Auto means "this host's address on the interface that routes to the
	// backends", resolved at runtime. When Auto is set, IPs is nil.
	Auto bool
	// IPs are the explicit IPv4 source addresses when Auto is false:
	// 1..MaxSNATAddrs distinct unicast addresses, in file order. YAML
	// "ip": one address, or a list of them. Each address multiplies the
	// ports available toward every backend (issue 13: the data path gives
	// each backend one port space per address). Each must be this
	// instance's own address, never a VIP shared by several instances
	// (checked at runtime by pkg/instance, not here).
	IPs []netip.Addr
	// PortLo and PortHi bound the source-port range, inclusive:
	// MinSNATPort <= PortLo <= PortHi <= 65535. YAML
	// port_range: "LO-HI"; default "40000-59999".
	PortLo, PortHi uint16
}

// FlowTable sizes the connection table (DESIGN §1).
type FlowTable struct {
	// MaxConnections is the number of connection pairs; each uses two
	// directional map entries. 1..MaxFlowConnections; default DefaultMaxConnections.
	MaxConnections uint32
	// EmbryonicTTL is how long after its SYN a pair whose handshake never
	// completed (no client ACK of the backend's SYN-ACK) is removed,
	// whatever it saw meanwhile (DESIGN §6b, issue 13). YAML
	// "embryonic_ttl_secs" (whole seconds); default DefaultEmbryonicTTL;
	// MinEmbryonicTTL up to the effective OrphanTTL.
	EmbryonicTTL time.Duration
	// UDPTimeout is how long a UDP pair that saw no reply lives after its
	// last datagram; UDPStreamTimeout how long one that saw a reply does
	// (conntrack's two; DESIGN §9, issue 31). YAML "udp_timeout_secs",
	// "udp_stream_timeout_secs" (whole seconds); defaults
	// DefaultUDPTimeout, DefaultUDPStreamTimeout; each
	// MinUDPTimeout..MaxUDPTimeout, UDPStreamTimeout at least UDPTimeout.
	UDPTimeout, UDPStreamTimeout time.Duration
}
