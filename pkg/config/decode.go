package config

import (
	"math"
	"net/netip"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// The decode* methods map the schema of DESIGN §1 onto Config. They check
// shape and type, and the rules of a single value that decide what can be
// stored: number ranges, the port_range syntax and floor, the
// orphan_ttl_secs minimum. Rules about enumerations, addresses and several
// fields together are in validate.go.

// decodeConfig overlays the document's root mapping onto c.
func (d *decoder) decodeConfig(root *yaml.Node, c *Config) {
	var udpMax uint32 // the top-level form's udp_unreplied_max, Services[0]'s
	d.mapping(root, "", []field{
		{"name", d.into(&c.Name)},
		{"listen", func(n *yaml.Node, p string) { d.decodeListen(n, p, &c.Listen) }},
		{"proto", d.into(&c.Proto)},
		{"mode", d.into(&c.Mode)},
		{"ports", func(n *yaml.Node, p string) { c.Ports = d.decodePorts(n, p) }},
		{"provider", func(n *yaml.Node, p string) { d.decodeProvider(n, p, &c.Provider) }},
		{"health_check", func(n *yaml.Node, p string) { c.HealthCheck = d.decodeHealthCheck(n, p) }},
		{"udp_unreplied_max", d.udpUnrepliedMax(&udpMax)},
		{"orphan_ttl_secs", func(n *yaml.Node, p string) { d.decodeOrphanTTL(n, p, &c.OrphanTTL) }},
		{"shutdown_timeout", func(n *yaml.Node, p string) {
			if v, ok := d.integer(n, p, 0, int64(MaxShutdownTimeout/time.Second), " seconds"); ok {
				c.ShutdownTimeout = time.Duration(v) * time.Second
			}
		}},
		{"admin", func(n *yaml.Node, p string) { d.decodeAdmin(n, p, &c.Admin) }},
		{"metrics", func(n *yaml.Node, p string) { d.decodeMetrics(n, p, &c.Metrics) }},
		{"interfaces", func(n *yaml.Node, p string) { c.Interfaces = d.decodeStrings(n, p) }},
		{"xdp_mode", d.into(&c.XDPMode)},
		{"snat", func(n *yaml.Node, p string) { d.decodeSNAT(n, p, &c.SNAT) }},
		{"flow_table", func(n *yaml.Node, p string) { d.decodeFlowTable(n, p, &c.FlowTable) }},
		{"state_dir", func(n *yaml.Node, p string) {
			if s, ok := d.str(n, p); ok {
				c.StateDir = s
				if s != "" {
					c.StateDir = filepath.Clean(s)
				}
			}
		}},
		{"bgp", func(n *yaml.Node, p string) { c.BGP = d.decodeBGP(n, p) }},
		{"services", func(n *yaml.Node, p string) { c.Services = d.decodeServices(n, p) }},
	})
	d.settleForm(c)
	if c.Form == FormTopLevel {
		c.Services[0].UDPUnrepliedMax = udpMax
	}
}

// into returns a decode function storing a string field in dst.
func (d *decoder) into(dst *string) func(*yaml.Node, string) {
	return func(n *yaml.Node, p string) {
		if s, ok := d.str(n, p); ok {
			*dst = s
		}
	}
}

// decodeListen reads `listen: auto` or `listen: {ip: A.B.C.D}`.
func (d *decoder) decodeListen(n *yaml.Node, path string, l *Listen) {
	if n.Kind == yaml.ScalarNode {
		if n.Value != "auto" {
			d.fail(n.Line, path, `must be "auto" or {ip: ADDRESS}, got %s`, describe(n))
			return
		}
		*l = Listen{Auto: true}
		return
	}
	*l = Listen{}
	d.mapping(n, path, []field{{"ip", func(n *yaml.Node, p string) { l.IP, _ = d.addr(n, p) }}})
}

// decodePorts reads the port mappings. Every item yields one entry (zero
// where it failed to decode) so that Ports[i] is always ports[i]. An
// omitted remote_port stays 0 here: defaultRemotePorts fills it in once
// the provider is known.
func (d *decoder) decodePorts(n *yaml.Node, path string) []PortMapping {
	return decodeSequence(d, n, path, func(it *yaml.Node, p string, pm *PortMapping) {
		d.mapping(it, p, []field{
			{"local_port", func(n *yaml.Node, p string) { pm.LocalPort, _ = d.port(n, p) }},
			{"remote_port", func(n *yaml.Node, p string) { pm.RemotePort, _ = d.port(n, p) }},
		})
	})
}

// defaultRemotePorts applies the rule for an omitted remote_port (issue
// 14) to the ports of the service at prefix ("" for the top-level form):
// with provider.kubernetes it stays 0, each backend's port from its
// EndpointSlice (provider.kubernetes.port_name); otherwise it is the
// local_port (DESIGN §1).
func (d *decoder) defaultRemotePorts(prefix string, ports []PortMapping, pr Provider) {
	if pr.Kubernetes != nil {
		return
	}
	for i := range ports {
		if !d.set[childPath(indexPath(childPath(prefix, "ports"), i), "remote_port")] {
			ports[i].RemotePort = ports[i].LocalPort
		}
	}
}

// decodeProvider reads `provider: {static: ...}` or
// `provider: {kubernetes: ...}`; validation checks that exactly one is set.
func (d *decoder) decodeProvider(n *yaml.Node, path string, pr *Provider) {
	d.mapping(n, path, []field{
		{"static", func(n *yaml.Node, p string) {
			pr.Static = &StaticProvider{}
			d.mapping(n, p, []field{{"backends", func(n *yaml.Node, p string) {
				pr.Static.Backends = d.decodeBackends(n, p)
			}}})
		}},
		{"kubernetes", func(n *yaml.Node, p string) {
			k := &KubernetesProvider{}
			pr.Kubernetes = k
			d.mapping(n, p, []field{
				{"namespace", d.into(&k.Namespace)},
				{"service", d.into(&k.Service)},
				{"kubeconfig", d.into(&k.Kubeconfig)},
				{"port_name", d.into(&k.PortName)},
			})
		}},
	})
}

// decodeBackends reads static backends; a backend without a name is named
// after its IP address (DESIGN §1 via the brief), one without a weight
// has DefaultWeight.
func (d *decoder) decodeBackends(n *yaml.Node, path string) []Backend {
	return decodeSequence(d, n, path, func(it *yaml.Node, p string, b *Backend) {
		b.Weight = DefaultWeight
		d.mapping(it, p, []field{
			{"name", d.into(&b.Name)},
			{"ip", func(n *yaml.Node, p string) { b.IP, _ = d.addr(n, p) }},
			{"weight", func(n *yaml.Node, p string) {
				if v, ok := d.integer(n, p, MinWeight, MaxWeight, ""); ok {
					b.Weight = uint16(v)
				}
			}},
		})
		if !d.set[childPath(p, "name")] && b.IP.IsValid() {
			b.Name = b.IP.String()
		}
	})
}

// decodeOrphanTTL reads orphan_ttl_secs. A value below MinOrphanTTL is not
// an error: it becomes MinOrphanTTL with one warning (seed "Inactive
// connection cleanup"). The ceiling is MaxOrphanTTL.
func (d *decoder) decodeOrphanTTL(n *yaml.Node, path string, dst *time.Duration) {
	v, ok := d.integer(n, path, math.MinInt64, math.MaxInt64, "")
	if !ok {
		return
	}
	if maxSecs := int64(MaxOrphanTTL / time.Second); v > maxSecs {
		d.fail(n.Line, path, "must be at most %d seconds (seven days), got %d", maxSecs, v)
		return
	}
	if minSecs := int64(MinOrphanTTL / time.Second); v < minSecs {
		d.warnf(path, "%d is below the minimum of %d seconds; using %d", v, minSecs, minSecs)
		v = minSecs
	}
	*dst = time.Duration(v) * time.Second
}

// decodeAdmin reads the admin listener and its optional auth.
func (d *decoder) decodeAdmin(n *yaml.Node, path string, a *Admin) {
	d.mapping(n, path, []field{
		{"address", func(n *yaml.Node, p string) { d.setAddr(n, p, &a.Address) }},
		{"port", func(n *yaml.Node, p string) { d.setPort(n, p, &a.Port) }},
		{"web_config_file", d.into(&a.WebConfigFile)},
		{"auth", func(n *yaml.Node, p string) {
			a.Auth = &AdminAuth{}
			d.mapping(n, p, []field{{"username", d.into(&a.Auth.Username)}})
		}},
		{"socket", d.into(&a.Socket)},
		{"allowed_hosts", func(n *yaml.Node, p string) { a.AllowedHosts = d.decodeAllowedHosts(n, p) }},
	})
}

// decodeAllowedHosts reads admin.allowed_hosts: host names (RFC 1123,
// compared in lower case) and IP addresses, without a port, each once.
// An empty list leaves only the address a request arrived on.
func (d *decoder) decodeAllowedHosts(n *yaml.Node, path string) []string {
	items, ok := d.sequence(n, path)
	if !ok {
		return nil
	}
	out := []string{}
	first := map[string]int{}
	for i, it := range items {
		p := indexPath(path, i)
		s, ok := d.str(it, p)
		if !ok {
			continue
		}
		h := strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
		if a, err := netip.ParseAddr(h); err == nil {
			if a.Zone() != "" {
				d.fail(it.Line, p, "%q: an address with a zone is not a Host header value", s)
				continue
			}
			h = a.Unmap().String()
		} else if !hostName.MatchString(h) || len(h) > 253 {
			d.fail(it.Line, p, "must be a host name or an IP address without a port, got %q", s)
			continue
		}
		if j, dup := first[h]; dup {
			d.errorAt(it.Line, p, "duplicate entry %s (also %s)", h, indexPath(path, j))
			continue
		}
		first[h] = i
		out = append(out, h)
	}
	return out
}

// hostName is a DNS host name (RFC 1123 labels of 1..63 letters, digits
// and '-', not starting or ending with '-'), without a trailing dot.
var hostName = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$`)

// decodeListener reads {address, port, web_config_file}.
func (d *decoder) decodeListener(n *yaml.Node, path string, l *Listener) {
	d.mapping(n, path, []field{
		{"address", func(n *yaml.Node, p string) { d.setAddr(n, p, &l.Address) }},
		{"port", func(n *yaml.Node, p string) { d.setPort(n, p, &l.Port) }},
		{"web_config_file", d.into(&l.WebConfigFile)},
	})
}

// decodeMetrics reads the metrics listener and its choice of series.
func (d *decoder) decodeMetrics(n *yaml.Node, path string, m *Metrics) {
	l := &m.Listener
	d.mapping(n, path, []field{
		{"address", func(n *yaml.Node, p string) { d.setAddr(n, p, &l.Address) }},
		{"port", func(n *yaml.Node, p string) { d.setPort(n, p, &l.Port) }},
		{"web_config_file", d.into(&l.WebConfigFile)},
		{"per_backend", func(n *yaml.Node, p string) { d.setBool(n, p, &m.PerBackend) }},
	})
}

// setAddr and setPort keep the default when the value fails to decode.
func (d *decoder) setAddr(n *yaml.Node, p string, dst *netip.Addr) {
	if a, ok := d.addr(n, p); ok {
		*dst = a
	}
}

func (d *decoder) setPort(n *yaml.Node, p string, dst *uint16) {
	if v, ok := d.port(n, p); ok {
		*dst = v
	}
}

// setBool keeps the default when the value fails to decode.
func (d *decoder) setBool(n *yaml.Node, p string, dst *bool) {
	if v, ok := d.boolean(n, p); ok {
		*dst = v
	}
}

// decodeStrings reads a sequence of strings; an empty one is nil, like an
// omitted one.
func (d *decoder) decodeStrings(n *yaml.Node, path string) []string {
	out := decodeSequence(d, n, path, func(it *yaml.Node, p string, s *string) { *s, _ = d.str(it, p) })
	if len(out) == 0 {
		return nil
	}
	return out
}

// decodeSequence decodes each item of the sequence at path with item,
// which gets the item's path and its element. Every item yields one
// element (zero where it failed to decode), so that out[i] is always
// path[i]; nil when n is not a sequence.
func decodeSequence[T any](d *decoder, n *yaml.Node, path string, item func(it *yaml.Node, p string, out *T)) []T {
	items, ok := d.sequence(n, path)
	if !ok {
		return nil
	}
	out := make([]T, len(items))
	for i, it := range items {
		item(it, indexPath(path, i), &out[i])
	}
	return out
}

// decodeFlowTable reads {max_connections, embryonic_ttl_secs,
// udp_timeout_secs, udp_stream_timeout_secs}. The embryonic TTL's
// ceiling, the effective orphan_ttl_secs, and the stream timeout's floor,
// udp_timeout_secs, are checked by validation once both are known; here
// they are bounded by MaxOrphanTTL and MinUDPTimeout..MaxUDPTimeout.
func (d *decoder) decodeFlowTable(n *yaml.Node, path string, ft *FlowTable) {
	d.mapping(n, path, []field{
		{"max_connections", func(n *yaml.Node, p string) {
			if v, ok := d.integer(n, p, 1, MaxFlowConnections, ""); ok {
				ft.MaxConnections = uint32(v)
			}
		}},
		{"embryonic_ttl_secs", func(n *yaml.Node, p string) {
			if v, ok := d.integer(n, p, int64(MinEmbryonicTTL/time.Second), int64(MaxOrphanTTL/time.Second), " seconds (and at most orphan_ttl_secs)"); ok {
				ft.EmbryonicTTL = time.Duration(v) * time.Second
			}
		}},
		{"udp_timeout_secs", d.udpTimeout(&ft.UDPTimeout, "")},
		{"udp_stream_timeout_secs", d.udpTimeout(&ft.UDPStreamTimeout, " (and at least udp_timeout_secs)")},
	})
}

// udpTimeout returns a decode function for a UDP timeout in whole
// seconds, MinUDPTimeout..MaxUDPTimeout.
func (d *decoder) udpTimeout(dst *time.Duration, also string) func(*yaml.Node, string) {
	return func(n *yaml.Node, p string) {
		if v, ok := d.integer(n, p, int64(MinUDPTimeout/time.Second), int64(MaxUDPTimeout/time.Second), " seconds"+also); ok {
			*dst = time.Duration(v) * time.Second
		}
	}
}

// udpUnrepliedMax returns a decode function for a service's
// udp_unreplied_max, 1..MaxFlowConnections here; its ceiling, the
// effective flow_table.max_connections, and its proto are checked by
// validation.
func (d *decoder) udpUnrepliedMax(dst *uint32) func(*yaml.Node, string) {
	return func(n *yaml.Node, p string) {
		if v, ok := d.integer(n, p, 1, MaxFlowConnections, " (and at most flow_table.max_connections)"); ok {
			*dst = uint32(v)
		}
	}
}

// decodeSNAT reads {ip: auto|A.B.C.D|[A.B.C.D, ...], port_range: "LO-HI"}.
// A single address and a list of one decode alike (IPs of length 1); an
// item that fails to decode leaves an invalid address at its index.
func (d *decoder) decodeSNAT(n *yaml.Node, path string, s *SNAT) {
	d.mapping(n, path, []field{
		{"ip", func(n *yaml.Node, p string) {
			switch {
			case n.Kind == yaml.ScalarNode && n.Value == "auto":
				s.Auto, s.IPs = true, nil
			case n.Kind == yaml.SequenceNode:
				s.Auto = false
				s.IPs = decodeSequence(d, n, p, func(it *yaml.Node, p string, a *netip.Addr) { *a, _ = d.addr(it, p) })
			default:
				s.Auto, s.IPs = false, nil
				if a, ok := d.addr(n, p); ok {
					s.IPs = []netip.Addr{a}
				}
			}
		}},
		{"port_range", func(n *yaml.Node, p string) {
			str, ok := d.str(n, p)
			if !ok {
				return
			}
			lo, hi, ok := parsePortRange(str)
			switch {
			case !ok:
				d.fail(n.Line, p, `must be "LO-HI" with two port numbers, e.g. "40000-59999", got %q`, str)
			case lo < MinSNATPort || lo > hi || hi > 65535:
				d.fail(n.Line, p, `must satisfy %d <= LO <= HI <= 65535, got %q`, MinSNATPort, str)
			default:
				s.PortLo, s.PortHi = uint16(lo), uint16(hi)
			}
		}},
	})
}

// parsePortRange parses "LO-HI", two decimal numbers below 2^32; the
// caller checks that they are ports, their order and their floor.
func parsePortRange(s string) (lo, hi uint64, ok bool) {
	a, b, found := strings.Cut(s, "-")
	if !found {
		return 0, 0, false
	}
	lo, err1 := strconv.ParseUint(a, 10, 32)
	hi, err2 := strconv.ParseUint(b, 10, 32)
	return lo, hi, err1 == nil && err2 == nil
}
