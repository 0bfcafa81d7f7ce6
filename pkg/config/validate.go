package config

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
)

// validate applies the semantic rules of DESIGN §1 and §9 to a decoded
// config. Values that failed to decode are left zero (or at their default)
// and are skipped here, so one mistake yields one error. d.set tells a
// field that is missing from one that is present but wrong.
func validate(c *Config, d *decoder) {
	v := &validator{decoder: d, c: c}
	v.name()
	v.form()
	for i := range c.Services {
		v.svcs = append(v.svcs, svcRef{i: i, path: v.servicePath(i), s: &c.Services[i]})
	}
	for i := range v.svcs {
		v.svcs[i].usable = v.service(v.svcs[i])
	}
	v.acrossServices()
	v.implemented("mode", c.Mode, ModeNAT, ModeDSR)
	for _, r := range v.svcs {
		v.provider(r)
		v.healthCheck(childPath(r.path, "health_check"), r.s.HealthCheck, r.s.Proto)
	}
	v.admin()
	v.listeners()
	v.webConfigFiles()
	v.interfaces()
	v.xdpMode()
	v.snat()
	v.flowTable()
	v.udpUnrepliedMax()
	v.stateDir()
	v.bgp()
}

type validator struct {
	*decoder
	c *Config
	// svcs are the services, each with its field path.
	svcs []svcRef
}

// svcRef is one service and the path of its fields: "" in the top-level
// form (its messages name "ports[0]", as before DESIGN §9), "services[i]"
// in the services form.
type svcRef struct {
	i    int
	path string
	s    *Service
	// usable says whether the listen address is usable (auto, or an
	// explicit address that passed its checks): rules that compare
	// with it run only then.
	usable bool
}

// servicePath is the field path prefix of service i.
func (v *validator) servicePath(i int) string {
	if v.c.Form == FormTopLevel {
		return ""
	}
	return indexPath("services", i)
}

// field is the path of a service's field.
func (r svcRef) field(name string) string { return childPath(r.path, name) }

// describe names a service for a message about another one: its path,
// and its name when it has one.
func (r svcRef) describe() string {
	if r.path == "" {
		return "the top-level service"
	}
	if r.s.Name == "" {
		return r.path
	}
	return r.path + " (" + r.s.Name + ")"
}

// required says whether the field at path (a "parent.field" path) has a
// value to check. It reports a field the file did not set as missing, at
// the parent's line, and stays silent when the field or a parent failed to
// decode (that error is already reported).
func (v *validator) required(path string) bool {
	if v.failed(path) {
		return false
	}
	if v.set[path] {
		return true
	}
	parent := parentPath(path)
	v.errorf(parent, "missing field %q", strings.TrimPrefix(path[len(parent):], "."))
	return false
}

// name: 1..MaxNameLen bytes without control characters.
func (v *validator) name() {
	v.label("name", v.c.Name)
}

func (v *validator) label(path, s string) {
	switch {
	case s == "":
		v.errorf(path, "must not be empty")
	case len(s) > MaxNameLen:
		v.errorf(path, "must be at most %d bytes, got %d", MaxNameLen, len(s))
	case strings.ContainsFunc(s, unicode.IsControl):
		v.errorf(path, "must not contain control characters, got %q", s)
	}
}

// listen: an explicit address is a usable IPv4 unicast address; in the
// services form each service names one (no default). It returns whether
// the address is usable: auto, or explicit and valid.
func (v *validator) listen(r svcRef) bool {
	if v.c.Form == FormServices && !v.required(r.field("listen")) {
		return false
	}
	if r.s.Listen.Auto {
		return true
	}
	return v.required(r.field("listen.ip")) && v.unicastIPv4(r.field("listen.ip"), r.s.Listen.IP)
}

// unicastIPv4 checks an address the data path sends to or from: IPv4 (IPv6
// is not supported yet, DESIGN §1), not unspecified, loopback, multicast or
// broadcast. Invalid (failed to decode) addresses are skipped.
func (v *validator) unicastIPv4(path string, a netip.Addr) bool {
	switch {
	case !a.IsValid():
		return false
	case a.Is4In6():
		v.errorf(path, "%s is an IPv4-mapped IPv6 address; write it as %s", a, a.Unmap())
	case a.Is6():
		v.errorf(path, "%s: IPv6 is not supported yet; use an IPv4 address", a)
	case a.IsUnspecified():
		v.errorf(path, "must not be the unspecified address %s", a)
	case a.IsLoopback():
		v.errorf(path, "must not be a loopback address, got %s", a)
	case a.IsMulticast():
		v.errorf(path, "must not be a multicast address, got %s", a)
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		v.errorf(path, "must not be the broadcast address %s", a)
	default:
		return true
	}
	return false
}

// service checks one service's own fields and reports whether its listen
// address is usable: listen, proto (tcp or udp, issue 31), ports, and
// the scheduler and its settings (scheduler.go).
func (v *validator) service(r svcRef) bool {
	if v.c.Form == FormServices {
		v.serviceName(r)
	}
	usable := v.listen(r)
	if p := r.field("proto"); !v.failed(p) && r.s.Proto != ProtoTCP && r.s.Proto != ProtoUDP {
		v.errorf(p, "must be %q or %q, got %q", ProtoTCP, ProtoUDP, r.s.Proto)
	}
	v.ports(r)
	v.scheduler(r)
	return usable
}

// serviceName: a listed service's name is present and of DESIGN §9's
// syntax; uniqueness is checked across services.
func (v *validator) serviceName(r svcRef) {
	p := r.field("name")
	if !v.required(p) {
		return
	}
	if !serviceName.MatchString(r.s.Name) {
		v.errorf(p, "must be 1-32 lowercase letters, digits, '_' or '-', the first a letter or digit, got %q", r.s.Name)
	}
}

// implemented checks an enumerated field whose schema names two values of
// which only one is implemented yet.
func (v *validator) implemented(path, got, done, planned string) {
	switch got {
	case done:
	case planned:
		v.errorf(path, "%s is not implemented yet; only %s is supported", planned, done)
	default:
		v.errorf(path, "must be %q, got %q", done, got)
	}
}

// ports: MinPortMappings..MaxPortMappings mappings, local_port present and unique (DESIGN §1). Port
// ranges were checked while decoding.
func (v *validator) ports(r svcRef) {
	path := r.field("ports")
	if !v.required(path) {
		return
	}
	n := len(r.s.Ports)
	switch {
	case n < MinPortMappings:
		v.errorf(path, "at least %d port mapping is required", MinPortMappings)
	case n > MaxPortMappings:
		v.errorf(path, "at most %d port mappings are supported, got %d", MaxPortMappings, n)
	}
	first := map[uint16]int{}
	for i, pm := range r.s.Ports {
		p := indexPath(path, i)
		if !v.required(childPath(p, "local_port")) || pm.LocalPort == 0 {
			continue
		}
		if j, dup := first[pm.LocalPort]; dup {
			v.errorf(childPath(p, "local_port"), "duplicate local_port %d (also %s)", pm.LocalPort, indexPath(path, j))
			continue
		}
		first[pm.LocalPort] = i
	}
}

// provider: exactly one provider (DESIGN §1).
func (v *validator) provider(r svcRef) {
	path := r.field("provider")
	if !v.required(path) {
		return
	}
	pr := r.s.Provider
	switch {
	case pr.Static == nil && pr.Kubernetes == nil:
		v.errorf(path, `must set exactly one of "static" or "kubernetes"`)
	case pr.Static != nil && pr.Kubernetes != nil:
		v.errorf(path, `must set exactly one of "static" or "kubernetes", not both`)
	}
	if pr.Static != nil {
		v.static(r, pr.Static)
	}
	if pr.Kubernetes != nil {
		v.kubernetes(childPath(path, "kubernetes"), pr.Kubernetes)
	}
}

// static: 1..MaxBackends backends; IPs of the service's listen family
// (DESIGN §9: no NAT46/64), usable IPv4, no service's listen address,
// unique; names non-empty and unique (DESIGN §1).
func (v *validator) static(r svcRef, s *StaticProvider) {
	path := r.field("provider.static.backends")
	if v.failed(path) {
		return
	}
	switch n := len(s.Backends); {
	case n == 0:
		v.errorf(path, "at least 1 backend is required")
	case n > MaxBackends:
		v.errorf(path, "at most %d backends are supported (the data path's backend ids), got %d", MaxBackends, n)
	}
	ips := map[netip.Addr]int{}
	names := map[string]int{}
	for i, b := range s.Backends {
		p := indexPath(path, i)
		if ip := childPath(p, "ip"); v.required(ip) && v.backendFamily(r, ip, b.IP) && v.unicastIPv4(ip, b.IP) {
			v.notAListenAddress(r, ip, b.IP)
			if j, dup := ips[b.IP]; dup {
				v.errorf(ip, "duplicate ip %s (also %s)", b.IP, indexPath(path, j))
			} else {
				ips[b.IP] = i
			}
		}
		np := childPath(p, "name")
		switch {
		case v.failed(np):
			continue
		case v.set[np] && b.Name == "":
			v.errorf(np, "must not be empty (omit it to use the IP address)")
			continue
		case b.Name == "":
			continue // unnamed, and no valid IP to name it after
		case v.set[np]:
			v.label(np, b.Name)
		}
		if j, dup := names[b.Name]; dup {
			v.errorf(np, "duplicate name %q (also %s)", b.Name, indexPath(path, j))
		} else {
			names[b.Name] = i
		}
	}
}

// backendFamily: a backend is of its service's listen family (DESIGN §9:
// no NAT46/64); auto is IPv4. It says whether to go on checking the
// address: not when the family differs (reported) or when the listen
// address itself is refused (its error is the service's one line).
func (v *validator) backendFamily(r svcRef, path string, a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	if !r.usable {
		l := r.s.Listen
		return l.Auto || !l.IP.IsValid() || !l.IP.Is6() || l.IP.Is4In6()
	}
	if a.Is6() && !a.Is4In6() {
		listen := "auto"
		if !r.s.Listen.Auto {
			listen = r.s.Listen.IP.String()
		}
		v.errorf(path, "%s is IPv6 and the listen address (%s) IPv4: a service's backends are of its listen family (no NAT64)", a, listen)
		return false
	}
	return true
}

// notAListenAddress: a backend is no service's listen address.
func (v *validator) notAListenAddress(r svcRef, path string, a netip.Addr) {
	for _, o := range v.svcs {
		if !o.usable || o.s.Listen.Auto || o.s.Listen.IP != a {
			continue
		}
		if o.i == r.i {
			v.errorf(path, "must not be the listen address %s", a)
		} else {
			v.errorf(path, "must not be the listen address %s of %s", a, o.describe())
		}
		return
	}
}

var (
	dns1123Label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dns1035Label = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)
)

// kubernetes: namespace is a DNS-1123 label and service a DNS-1035 label,
// as Kubernetes itself requires; port_name is empty or a DNS-1123 label
// (a Service port name); kubeconfig is optional.
func (v *validator) kubernetes(path string, k *KubernetesProvider) {
	const dns1123 = "DNS-1123 label (1-63 lowercase letters, digits or '-'; first and last a letter or digit)"
	check := func(field, value, kind string, re *regexp.Regexp) {
		p := childPath(path, field)
		if !v.required(p) {
			return
		}
		if len(value) > 63 || !re.MatchString(value) {
			v.errorf(p, "must be a %s, got %q", kind, value)
		}
	}
	check("namespace", k.Namespace, dns1123, dns1123Label)
	check("service", k.Service, "DNS-1035 label (1-63 lowercase letters, digits or '-'; first a letter, last a letter or digit)", dns1035Label)
	p := childPath(path, "port_name")
	if n := k.PortName; !v.failed(p) && n != "" && (len(n) > 63 || !dns1123Label.MatchString(n)) {
		v.errorf(p, "must be empty (the unnamed port) or a %s, got %q", dns1123, n)
	}
}

// admin: the basic-auth username is non-empty without ':' (DESIGN §1);
// the socket is a clean absolute path that fits a unix socket address
// (issue 28). The port range and allowed_hosts were checked while
// decoding.
func (v *validator) admin() {
	if p, s := "admin.socket", v.c.Admin.Socket; !v.failed(p) {
		switch {
		case !filepath.IsAbs(s):
			v.errorf(p, "must be an absolute path, got %q", s)
		case filepath.Clean(s) != s:
			v.errorf(p, "must be a clean path (%s), got %q", filepath.Clean(s), s)
		case len(s) > MaxAdminSocketLen:
			v.errorf(p, "must be at most %d bytes (a unix socket address), got %d", MaxAdminSocketLen, len(s))
		}
	}
	if v.c.Admin.Auth == nil {
		return
	}
	p := "admin.auth.username"
	if !v.required(p) {
		return
	}
	switch u := v.c.Admin.Auth.Username; {
	case u == "":
		v.errorf(p, "must not be empty")
	case strings.Contains(u, ":"):
		v.errorf(p, "must not contain ':', got %q", u)
	}
}

// listeners: admin and metrics must not share an address:port (an
// unspecified address overlaps every address), and neither may sit on a
// local_port of the listen address, where XDP would take its packets
// before the kernel sees them. A port below 1024 is a warning: binding it
// needs CAP_NET_BIND_SERVICE, which the packaged unit does not grant.
func (v *validator) listeners() {
	a, m := v.c.Admin, v.c.Metrics.Listener
	for _, l := range []struct {
		path string
		port uint16
	}{{"admin.port", a.Port}, {"metrics.port", m.Port}} {
		if l.port > 0 && l.port < PrivilegedPortEnd && !v.failed(l.path) {
			v.warnf(l.path, "%d is below %d: binding it needs CAP_NET_BIND_SERVICE, which the packaged xlb.service does not grant (CapabilityBoundingSet=CAP_BPF CAP_NET_ADMIN), so the start would fail; use a port from %d, or add the capability in a drop-in (systemctl edit xlb)", l.port, PrivilegedPortEnd, PrivilegedPortEnd)
		}
	}
	if a.Port == m.Port && (a.Address == m.Address || a.Address.IsUnspecified() || m.Address.IsUnspecified()) {
		// Report it where the file set a port: metrics, else admin.
		if v.set["metrics.port"] || !v.set["admin.port"] {
			v.errorf("metrics.port", "%s overlaps admin %s; admin and metrics need different ports",
				hostPort(m.Address, m.Port), hostPort(a.Address, a.Port))
		} else {
			v.errorf("admin.port", "%s overlaps metrics %s; admin and metrics need different ports",
				hostPort(a.Address, a.Port), hostPort(m.Address, m.Port))
		}
	}
	for _, l := range []struct {
		path string
		Listener
	}{{"admin", Listener{Address: a.Address, Port: a.Port}}, {"metrics", m}} {
		for _, r := range v.svcs {
			onListen := l.Address.IsUnspecified() || (!r.s.Listen.Auto && l.Address == r.s.Listen.IP)
			if !onListen {
				continue
			}
			for i, pm := range r.s.Ports {
				if pm.LocalPort == l.Port {
					v.errorf(childPath(l.path, "port"), "%d is also %s.local_port on the listen address; XDP would take these packets before the %s listener sees them", l.Port, indexPath(r.field("ports"), i), l.path)
				}
			}
		}
	}
}

// webConfigFiles: a listener's web_config_file, when set, is an absolute
// path (the daemon's working directory is not the config's); "" is the
// same as leaving it out, for templates that render an unset one. Its contents
// are pkg/weblisten's to check: this package reads no other file.
func (v *validator) webConfigFiles() {
	for _, l := range []struct{ path, file string }{
		{"admin.web_config_file", v.c.Admin.WebConfigFile},
		{"metrics.web_config_file", v.c.Metrics.WebConfigFile},
	} {
		if v.set[l.path] && l.file != "" && !filepath.IsAbs(l.file) {
			v.errorf(l.path, "must be an absolute path, got %q", l.file)
		}
	}
}

func hostPort(a netip.Addr, port uint16) string {
	return netip.AddrPortFrom(a, port).String()
}

// interfaces: valid Linux interface names (the kernel's dev_valid_name:
// 1..15 bytes, not "." or "..", no '/', ':' or whitespace), unique.
func (v *validator) interfaces() {
	if n := len(v.c.Interfaces); n > MaxInterfaces {
		v.errorf("interfaces", "at most %d interfaces are supported, got %d", MaxInterfaces, n)
	}
	first := map[string]int{}
	for i, name := range v.c.Interfaces {
		p := indexPath("interfaces", i)
		if v.failed(p) {
			continue
		}
		if !validIfName(name) {
			v.errorf(p, `%q is not a valid Linux interface name (1-%d characters, not "." or "..", no '/', ':' or whitespace)`, name, MaxInterfaceName)
			continue
		}
		if j, dup := first[name]; dup {
			v.errorf(p, "duplicate interface %q (also interfaces[%d])", name, j)
			continue
		}
		first[name] = i
	}
}

func validIfName(s string) bool {
	if s == "" || len(s) > MaxInterfaceName || s == "." || s == ".." {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool { return r == '/' || r == ':' || unicode.IsSpace(r) })
}

// xdpMode: auto|native|generic (DESIGN §1).
func (v *validator) xdpMode() {
	switch v.c.XDPMode {
	case XDPModeAuto, XDPModeNative, XDPModeGeneric:
	default:
		v.errorf("xdp_mode", "must be one of %s, %s, %s; got %q", XDPModeAuto, XDPModeNative, XDPModeGeneric, v.c.XDPMode)
	}
}

// snat: explicit addresses are 1..MaxSNATAddrs distinct usable IPv4
// unicast addresses (issue 13). A local_port of any service must not fall
// inside port_range when a SNAT address may be that service's listen
// address: explicitly
// equal, or either of them auto (the simplest safe rule, since auto is
// only resolved at runtime). There a packet to that port could be a
// client's or a backend's reply, and the data path could not tell the
// directions apart.
func (v *validator) snat() {
	s := v.c.SNAT
	if !s.Auto && (!v.required("snat.ip") || !v.snatAddrs(s.IPs)) {
		return
	}
	if v.failed("snat.port_range") {
		return
	}
	for _, r := range v.svcs {
		l := r.s.Listen
		if !s.Auto && !l.Auto && !slices.Contains(s.IPs, l.IP) {
			continue
		}
		for i, pm := range r.s.Ports {
			if pm.LocalPort >= s.PortLo && pm.LocalPort <= s.PortHi {
				v.errorf(childPath(indexPath(r.field("ports"), i), "local_port"), "%d is inside snat.port_range %d-%d%s; the data path could not tell client packets from backend replies",
					pm.LocalPort, s.PortLo, s.PortHi, sharedWhy(s.Auto, l.Auto, slices.Index(s.IPs, l.IP), len(s.IPs)))
			}
		}
	}
}

// snatAddrs checks the explicit SNAT addresses and reports whether all of
// them are usable. Errors name snat.ip for a single address and
// snat.ip[i] for an item of a list.
func (v *validator) snatAddrs(ips []netip.Addr) bool {
	const path = "snat.ip"
	list := v.seqs[path]
	switch n := len(ips); {
	case n == 0:
		v.errorf(path, `must list at least 1 address (or be "auto")`)
		return false
	case n > MaxSNATAddrs:
		v.errorf(path, "at most %d addresses are supported, got %d", MaxSNATAddrs, n)
		return false
	}
	ok := true
	first := map[netip.Addr]int{}
	for i, a := range ips {
		p := path
		if list {
			p = indexPath(path, i)
		}
		if v.failed(p) || !v.unicastIPv4(p, a) {
			ok = false
			continue
		}
		if j, dup := first[a]; dup {
			v.errorf(p, "duplicate address %s (also %s)", a, indexPath(path, j))
			ok = false
			continue
		}
		first[a] = i
	}
	return ok
}

// flowTable: the embryonic TTL is at most the effective orphan TTL (an
// embryonic pair never outlives an idle one). Its range was checked while
// decoding.
func (v *validator) flowTable() {
	const path = "flow_table.embryonic_ttl_secs"
	ft := v.c.FlowTable
	if v.failed(path) || v.failed("orphan_ttl_secs") || ft.EmbryonicTTL <= v.c.OrphanTTL {
		return
	}
	v.errorf(path, "must be at most orphan_ttl_secs (%d), got %d",
		int64(v.c.OrphanTTL/time.Second), int64(ft.EmbryonicTTL/time.Second))
}

// udpTimeouts: a pair that saw a reply lives at least as long as one that
// did not (conntrack's rule for its two UDP timeouts). Their ranges were
// checked while decoding.
func (v *validator) udpTimeouts() {
	const path = "flow_table.udp_stream_timeout_secs"
	ft := v.c.FlowTable
	if v.failed(path) || v.failed("flow_table.udp_timeout_secs") || ft.UDPStreamTimeout >= ft.UDPTimeout {
		return
	}
	v.errorf(path, "must be at least udp_timeout_secs (%d), got %d",
		int64(ft.UDPTimeout/time.Second), int64(ft.UDPStreamTimeout/time.Second))
}

// udpUnrepliedMax: a service's udp_unreplied_max is for proto udp and at
// most flow_table.max_connections (issue 31). When the UDP services'
// effective caps add up to more than max_connections, one warning: a
// flood on all of them at once could still fill the table.
func (v *validator) udpUnrepliedMax() {
	v.udpTimeouts()
	mc := v.c.FlowTable.MaxConnections
	var sum uint64
	udp := 0
	for _, r := range v.svcs {
		p := r.field("udp_unreplied_max")
		if v.set[p] && !v.failed(p) && !v.failed(r.field("proto")) {
			switch {
			case r.s.Proto != ProtoUDP:
				v.errorf(p, "udp_unreplied_max is for proto udp services (proto is %s)", r.s.Proto)
				continue
			case r.s.UDPUnrepliedMax > mc && !v.failed("flow_table.max_connections"):
				v.errorf(p, "must be at most flow_table.max_connections (%d), got %d", mc, r.s.UDPUnrepliedMax)
				continue
			}
		}
		if r.s.Proto == ProtoUDP {
			sum += uint64(v.c.UDPUnrepliedMax(r.s))
			udp++
		}
	}
	if udp > 1 && sum > uint64(mc) && !v.failed("services") {
		v.warnf("services", "the %d UDP services' udp_unreplied_max add up to %d, more than flow_table.max_connections (%d): floods on these services together could fill the flow table TCP needs; lower udp_unreplied_max", udp, sum, mc)
	}
}

// sharedWhy says why the SNAT address may be the listen address; shared is
// the index of the listen address in a list of n SNAT addresses.
func sharedWhy(snatAuto, listenAuto bool, shared, n int) string {
	switch {
	case snatAuto && listenAuto:
		return " (snat.ip and listen are auto, so they may be the same address)"
	case snatAuto:
		return " (snat.ip is auto, so it may be the listen address)"
	case listenAuto:
		return " (listen is auto, so it may be the snat.ip address)"
	case n > 1:
		return fmt.Sprintf(" and snat.ip[%d] is the listen address", shared)
	}
	return " and snat.ip is the listen address"
}

// stateDir: an absolute path other than "/" (pins are created and removed
// there), whose last element has no dot: it is created on a BPF
// filesystem (DESIGN §6), which refuses names with one.
func (v *validator) stateDir() {
	d := v.c.StateDir
	switch {
	case !filepath.IsAbs(d):
		v.errorf("state_dir", "must be an absolute path, got %q", d)
	case d == "/":
		v.errorf("state_dir", `must not be "/"`)
	case strings.Contains(filepath.Base(d), "."):
		v.errorf("state_dir", "%q: its last element must not contain a dot (a BPF filesystem refuses such names)", d)
	}
}
