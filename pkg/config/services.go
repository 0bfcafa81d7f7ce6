package config

import (
	"math"
	"net/netip"
	"regexp"

	yaml "go.yaml.in/yaml/v3"

	"github.com/xlbproject/xlb/pkg/sched"
)

// The `services:` form of DESIGN §9: decoding. Validation of each service
// and of the rules across services is in validate.go, like the top-level
// form's; both forms go through the same per-service rules, with the
// top-level form's service at path "" (so its messages name "ports[0]",
// as they always did) and a listed service at "services[i]".

// serviceKeys are a service's keys, in the order Marshal writes them
// (DESIGN §9): the top-level form has all but scheduler, maglev and
// proxy_protocol at the top level.
var serviceKeys = []string{"name", "listen", "proto", "ports", "scheduler", "maglev", "provider", "health_check", "udp_unreplied_max"}

// topLevelServiceKeys are the top-level form's keys that describe its one
// service; with `services:` they belong inside each service.
var topLevelServiceKeys = []string{"listen", "proto", "ports", "provider", "health_check", "udp_unreplied_max"}

// instanceKeys are the per-instance keys (DESIGN §9): at the top level in
// both forms, never inside a service.
var instanceKeys = []string{
	"mode", "orphan_ttl_secs", "shutdown_timeout", "admin", "metrics",
	"interfaces", "xdp_mode", "snat", "flow_table", "state_dir", "bgp",
}

// serviceName is the syntax of a service name (DESIGN §9): it labels
// metrics and fits the data path's XLB_SERVICE_NAME_LEN (32) bytes.
var serviceName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// Keys of DESIGN §9 that later issues implement: decoded so that the
// refusal names them (not "unknown field"), one line each, worded like
// mode dsr's refusal.
const (
	refusedProxyProtocol = "proxy_protocol is not implemented yet; backends get no PROXY header"
)

// refuse returns a decode function that reports a key of a later issue.
func (d *decoder) refuse(msg string) func(*yaml.Node, string) {
	return func(n *yaml.Node, p string) { d.errorf(p, "%s", msg) }
}

// decodeServices reads the services list. Every item yields one Service
// (zero fields where decoding failed), so Services[i] is services[i].
func (d *decoder) decodeServices(n *yaml.Node, path string) []Service {
	return decodeSequence(d, n, path, func(it *yaml.Node, p string, s *Service) {
		s.Proto, s.Scheduler = DefaultProto, SchedulerRoundRobin
		fields := []field{
			{"name", d.into(&s.Name)},
			{"listen", func(n *yaml.Node, p string) { d.decodeListen(n, p, &s.Listen) }},
			{"proto", d.into(&s.Proto)},
			{"ports", func(n *yaml.Node, p string) { s.Ports = d.decodePorts(n, p) }},
			{"scheduler", d.into(&s.Scheduler)},
			{"maglev", func(n *yaml.Node, p string) { s.Maglev = d.decodeMaglev(n, p) }},
			{"provider", func(n *yaml.Node, p string) { d.decodeProvider(n, p, &s.Provider) }},
			{"health_check", func(n *yaml.Node, p string) { s.HealthCheck = d.decodeHealthCheck(n, p) }},
			{"udp_unreplied_max", d.udpUnrepliedMax(&s.UDPUnrepliedMax)},
			{"proxy_protocol", d.refuse(refusedProxyProtocol)},
		}
		for _, k := range instanceKeys {
			fields = append(fields, field{k, func(n *yaml.Node, p string) {
				d.errorf(p, "%s is per instance; put it at the top level", k)
			}})
		}
		d.mapping(it, p, fields)
		d.defaultRemotePorts(p, s.Ports, s.Provider)
	})
}

// decodeMaglev reads `maglev: {hash, table_size}`; hash defaults to
// five_tuple, an omitted table_size stays 0 (Service.TableSize chooses
// it). The enumeration, the size's primality and its relation to the
// backends are checked by validation (scheduler.go).
func (d *decoder) decodeMaglev(n *yaml.Node, path string) *Maglev {
	m := &Maglev{Hash: MaglevHashFiveTuple}
	d.mapping(n, path, []field{
		{"hash", d.into(&m.Hash)},
		{"table_size", func(n *yaml.Node, p string) {
			v, ok := d.integer(n, p, math.MinInt64, math.MaxInt64, "")
			switch {
			case !ok:
			case v < sched.MinMaglevSize || v > sched.MaxMaglevSize:
				d.fail(n.Line, p, "must be a prime between %d and %d, got %d (%s)", sched.MinMaglevSize, sched.MaxMaglevSize, v, sizesHint)
			default:
				m.TableSize = uint32(v)
			}
		}},
	})
	return m
}

// settleForm fills Config.Services and Config.Form once the whole file is
// read. The top-level form is one service named after name, whose fields
// stay in the top-level mirror (Listen, Proto, Ports, Provider,
// HealthCheck) so that Marshal prints that form back. With `services:`
// the mirror is zero; a top-level key of the other form is reported by
// validation.
func (d *decoder) settleForm(c *Config) {
	if !d.set["services"] {
		c.Form = FormTopLevel
		d.defaultRemotePorts("", c.Ports, c.Provider)
		c.Services = nil
		c.Services = c.ServiceList() // the one service of the top-level fields
		return
	}
	c.Form = FormServices
	c.Listen, c.Proto, c.Ports, c.Provider, c.HealthCheck = Listen{}, "", nil, Provider{}, nil
}

// form: a file uses the top-level form or `services:`, never both
// (DESIGN §9); the list holds 1..MaxServices services.
func (v *validator) form() {
	if v.c.Form != FormServices {
		return
	}
	for _, k := range topLevelServiceKeys {
		if v.set[k] {
			v.errorf(k, "the file lists services:, so %s belongs inside each service (a file uses the top-level form or services:, not both)", k)
		}
	}
	if v.failed("services") {
		return
	}
	switch n := len(v.c.Services); {
	case n == 0:
		v.errorf("services", "at least 1 service is required")
	case n > MaxServices:
		v.errorf("services", "at most %d services are supported (the data path's service ids), got %d", MaxServices, n)
	}
}

// acrossServices: names unique; at most one `listen: auto`; (listen
// address, proto, local_port) unique; the static backends of all
// services at most MaxMembers (DESIGN §9).
func (v *validator) acrossServices() {
	names := map[string]int{}
	auto := -1
	type listenKey struct {
		addr  netip.Addr
		proto string
		port  uint16
	}
	listens := map[listenKey][2]int{}
	members := 0
	for _, r := range v.svcs {
		s := r.s
		if np := r.field("name"); v.c.Form == FormServices && v.set[np] && !v.failed(np) && s.Name != "" {
			if j, dup := names[s.Name]; dup {
				v.errorf(np, "duplicate name %q (also %s)", s.Name, v.svcs[j].field("name"))
			} else {
				names[s.Name] = r.i
			}
		}
		if s.Listen.Auto && r.usable {
			if auto >= 0 {
				v.errorf(r.field("listen"), "at most one service may listen on auto; %s does", v.svcs[auto].describe())
			} else {
				auto = r.i
			}
		}
		if r.usable && !s.Listen.Auto {
			for k, pm := range s.Ports {
				if pm.LocalPort == 0 {
					continue
				}
				key := listenKey{s.Listen.IP, s.Proto, pm.LocalPort}
				if o, dup := listens[key]; dup && o[0] != r.i {
					other := v.svcs[o[0]]
					v.errorf(childPath(indexPath(r.field("ports"), k), "local_port"), "%s %s/%d is also %s.local_port (service %q); a listen address, proto and local_port belong to one service",
						s.Listen.IP, s.Proto, pm.LocalPort, indexPath(other.field("ports"), o[1]), other.s.Name)
				} else if !dup {
					listens[key] = [2]int{r.i, k}
				}
			}
		}
		if st := s.Provider.Static; st != nil {
			members += len(st.Backends)
		}
	}
	if members > MaxMembers && v.c.Form == FormServices && !v.failed("services") {
		v.errorf("services", "the services have %d static backends in all; at most %d are supported (the data path's member ids)", members, MaxMembers)
	}
}
