package config

import "slices"

// topLevelKeys are the top-level YAML keys of DESIGN §1, in document order.
var topLevelKeys = []string{
	"name", "listen", "proto", "mode", "ports", "provider", "health_check",
	"udp_unreplied_max", "orphan_ttl_secs", "shutdown_timeout", "admin", "metrics",
	"interfaces", "xdp_mode", "snat", "flow_table", "state_dir", "bgp",
}

// keyEqual compares the part of two configs under one top-level key.
var keyEqual = map[string]func(a, b *Config) bool{
	"name":         func(a, b *Config) bool { return a.Name == b.Name },
	"listen":       func(a, b *Config) bool { return a.Listen == b.Listen },
	"proto":        func(a, b *Config) bool { return a.Proto == b.Proto },
	"mode":         func(a, b *Config) bool { return a.Mode == b.Mode },
	"ports":        func(a, b *Config) bool { return slices.Equal(a.Ports, b.Ports) },
	"provider":     func(a, b *Config) bool { return providerEqual(a.Provider, b.Provider) },
	"health_check": func(a, b *Config) bool { return healthCheckEqual(a.HealthCheck, b.HealthCheck) },
	"udp_unreplied_max": func(a, b *Config) bool {
		return a.ServiceList()[0].UDPUnrepliedMax == b.ServiceList()[0].UDPUnrepliedMax
	},
	"orphan_ttl_secs":  func(a, b *Config) bool { return a.OrphanTTL == b.OrphanTTL },
	"shutdown_timeout": func(a, b *Config) bool { return a.ShutdownTimeout == b.ShutdownTimeout },
	"admin":            func(a, b *Config) bool { return adminEqual(a.Admin, b.Admin) },
	"metrics":          func(a, b *Config) bool { return a.Metrics == b.Metrics },
	"interfaces":       func(a, b *Config) bool { return slices.Equal(a.Interfaces, b.Interfaces) },
	"xdp_mode":         func(a, b *Config) bool { return a.XDPMode == b.XDPMode },
	"snat":             func(a, b *Config) bool { return snatEqual(a.SNAT, b.SNAT) },
	"flow_table":       func(a, b *Config) bool { return a.FlowTable == b.FlowTable },
	"state_dir":        func(a, b *Config) bool { return a.StateDir == b.StateDir },
	"bgp":              func(a, b *Config) bool { return bgpEqual(a.BGP, b.BGP) },
}

// Diff returns the sorted keys whose effective values differ between a
// and b, e.g. ["ports", "provider"]; nil when the configs are equal. A nil
// config compares as Default(). Two files of the top-level form differ in
// top-level keys. When either lists services (DESIGN §9), the services are
// matched by name, as a reload matches them: the per-instance keys (and
// name) as above, "services[web]" for a service only one of them has, and
// "services[web].ports" for a key of a service both have (its order in
// the list does not count). A running instance applies none of these
// until `systemctl reload xlb` (a hot upgrade, DESIGN §6); the file
// watcher names them in its "reload required" warning and in the status
// API (DESIGN §1).
func Diff(a, b *Config) []string {
	if a == nil {
		a = Default()
	}
	if b == nil {
		b = Default()
	}
	var keys []string
	if a.Form != FormServices && b.Form != FormServices {
		for _, k := range topLevelKeys {
			if !keyEqual[k](a, b) {
				keys = append(keys, k)
			}
		}
	} else {
		for _, k := range append([]string{"name"}, instanceKeys...) {
			if !keyEqual[k](a, b) {
				keys = append(keys, k)
			}
		}
		keys = append(keys, diffServices(a.ServiceList(), b.ServiceList())...)
	}
	slices.Sort(keys)
	return keys
}

// serviceKeyEqual compares one key of two services (serviceKeys but
// name, by which they were matched).
var serviceKeyEqual = map[string]func(a, b *Service) bool{
	"listen":    func(a, b *Service) bool { return a.Listen == b.Listen },
	"proto":     func(a, b *Service) bool { return a.Proto == b.Proto },
	"ports":     func(a, b *Service) bool { return slices.Equal(a.Ports, b.Ports) },
	"scheduler": func(a, b *Service) bool { return a.Scheduler == b.Scheduler },
	// maglev: the effective hash and table size, so that a change of the
	// static backends' count that changes the default size (a remap of
	// nearly every client) is named too.
	"maglev":       func(a, b *Service) bool { return a.MaglevHash() == b.MaglevHash() && a.TableSize() == b.TableSize() },
	"provider":     func(a, b *Service) bool { return providerEqual(a.Provider, b.Provider) },
	"health_check": func(a, b *Service) bool { return healthCheckEqual(a.HealthCheck, b.HealthCheck) },
	// udp_unreplied_max: as the file sets it (a default that follows
	// max_connections is named by flow_table).
	"udp_unreplied_max": func(a, b *Service) bool { return a.UDPUnrepliedMax == b.UDPUnrepliedMax },
}

// diffServices names the services only one list has, "services[NAME]",
// and the differing keys of those both have, "services[NAME].KEY".
func diffServices(a, b []Service) []string {
	byName := func(ss []Service) map[string]*Service {
		m := make(map[string]*Service, len(ss))
		for i := range ss {
			m[ss[i].Name] = &ss[i]
		}
		return m
	}
	am, bm := byName(a), byName(b)
	var keys []string
	for name, as := range am {
		bs, ok := bm[name]
		if !ok {
			keys = append(keys, serviceKey(name, ""))
			continue
		}
		for _, k := range serviceKeys[1:] {
			if !serviceKeyEqual[k](as, bs) {
				keys = append(keys, serviceKey(name, k))
			}
		}
	}
	for name := range bm {
		if _, ok := am[name]; !ok {
			keys = append(keys, serviceKey(name, ""))
		}
	}
	return keys
}

// serviceKey is "services[NAME]" or "services[NAME].KEY".
func serviceKey(name, key string) string {
	if key == "" {
		return "services[" + name + "]"
	}
	return "services[" + name + "]." + key
}

func providerEqual(a, b Provider) bool {
	if (a.Static == nil) != (b.Static == nil) || (a.Kubernetes == nil) != (b.Kubernetes == nil) {
		return false
	}
	if a.Static != nil && !slices.Equal(a.Static.Backends, b.Static.Backends) {
		return false
	}
	return a.Kubernetes == nil || *a.Kubernetes == *b.Kubernetes
}

func adminEqual(a, b Admin) bool {
	if a.Address != b.Address || a.Port != b.Port || a.WebConfigFile != b.WebConfigFile || (a.Auth == nil) != (b.Auth == nil) ||
		a.Socket != b.Socket || !slices.Equal(a.AllowedHosts, b.AllowedHosts) {
		return false
	}
	return a.Auth == nil || *a.Auth == *b.Auth
}

func snatEqual(a, b SNAT) bool {
	return a.Auto == b.Auto && slices.Equal(a.IPs, b.IPs) && a.PortLo == b.PortLo && a.PortHi == b.PortHi
}
