package main

import (
	"fmt"
	"strings"

	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// oldestSchema is the oldest status document schema xlbctl reads: version
// 1, a daemon before services (issue 29), describes its one service in
// the top-level listen, provider and backends.
const oldestSchema = 1

// schema1Services is the one service a schema version 1 document
// describes in its top-level fields, as a schema 2 daemon would list it:
// named after the instance, serving, its readiness and connections the
// instance's.
func schema1Services(d *api.Document) []api.Service {
	c := d.Connections
	return []api.Service{{
		Name: d.Name, State: api.ServiceServing, Listen: d.Listen, Proto: "tcp", Scheduler: config.SchedulerRoundRobin,
		Readiness: d.Readiness, Provider: d.Provider, Backends: d.Backends,
		Connections: api.ServiceConnections{
			Active: c.Active, TimeWait: c.TimeWait, OpenedTotal: c.OpenedTotal, ClosedTotal: c.ClosedTotal,
			ClosedBy: c.ClosedBy, OrphanedTotal: c.OrphanedTotal, EmbryonicExpiredTotal: c.EmbryonicExpiredTotal,
		},
	}}
}

// selectService keeps only the service called name in d.Services
// (--service); an error naming the instance's services when none has that
// name. An empty name keeps every service.
func selectService(d *api.Document, name string) error {
	if name == "" {
		return nil
	}
	names := make([]string, 0, len(d.Services))
	for _, svc := range d.Services {
		if svc.Name == name {
			d.Services = []api.Service{svc}
			return nil
		}
		names = append(names, svc.Name)
	}
	has := "none"
	if len(names) > 0 {
		has = strings.Join(names, ", ")
	}
	return fmt.Errorf("--service %s: the instance has no such service (its services: %s)", name, has)
}

// serviceState is a service's state and readiness: "serving, ready",
// "serving, NOT READY (no_routable_backends)", or for a service a reload
// removed, "draining: removed by a reload, its connections flow until
// they end".
func serviceState(svc api.Service) string {
	if svc.State == api.ServiceDraining {
		return "draining: removed by a reload, its connections flow until they end"
	}
	return orDash(string(svc.State)) + ", " + readiness(svc.Readiness)
}

// serviceListen is the service's address, protocol, ports and scheduler
// (serviceScheduler): "192.0.2.10 tcp ports 80->8080, 443->8443
// (round_robin)".
func serviceListen(svc api.Service) string {
	l := listen(svc.Listen)
	if svc.Proto != "" {
		if i := strings.Index(l, " ports "); i >= 0 {
			l = l[:i] + " " + svc.Proto + l[i:]
		} else {
			l += " " + svc.Proto
		}
	}
	if svc.Scheduler != "" {
		l += " (" + serviceScheduler(svc) + ")"
	}
	return l
}

// serviceScheduler is the scheduler with its table (issue 30):
// "round_robin", "weighted_round_robin: 5 slots, 2 rebuilds",
// "maglev: client_ip, 16381 slots, 4 rebuilds"; "no table yet" before the
// first, and OVERFULL when a Maglev table has fewer than 100 slots per
// routable backend.
func serviceScheduler(svc api.Service) string {
	var parts []string
	if m := svc.Maglev; m != nil {
		parts = append(parts, m.Hash)
	}
	if t := svc.Table; t != nil {
		if t.Size == 0 {
			parts = append(parts, "no table yet")
		} else {
			parts = append(parts, plural(uint64(t.Size), "slot"), plural(t.RebuildsTotal, "rebuild"))
		}
		if t.Overfull {
			parts = append(parts, "OVERFULL: under 100 slots per routable backend")
		}
	}
	if len(parts) == 0 {
		return svc.Scheduler
	}
	return svc.Scheduler + ": " + strings.Join(parts, ", ")
}

// plural is "1 slot", "16381 slots".
func plural(n uint64, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// serviceConnections summarises a service's connection counts.
func serviceConnections(c api.ServiceConnections) string {
	return fmt.Sprintf("active %d, timewait %d, opened %d, closed %d, orphaned %d",
		c.Active, c.TimeWait, c.OpenedTotal, c.ClosedTotal, c.OrphanedTotal)
}

// serviceHeader introduces a service's table in backends and top:
// "Service web (serving, ready): 192.0.2.10 tcp ports 80->8080 (round_robin)";
// a UDP service's adds its pairs (udpSummary).
func serviceHeader(svc api.Service) string {
	state := string(svc.State)
	if svc.State != api.ServiceDraining {
		state += ", " + readiness(svc.Readiness)
	}
	h := fmt.Sprintf("Service %s (%s): %s", orDash(svc.Name), state, serviceListen(svc))
	if u := svc.UDP; u != nil {
		h += " · " + udpSummary(*u)
	}
	return h
}

// udpSummary is a UDP service's pairs in a few words (issue 31):
// "812 pairs (40 unreplied, cap 65536)".
func udpSummary(u api.ServiceUDP) string {
	return fmt.Sprintf("%s (%d unreplied, cap %d)", plural(u.Active, "pair"), u.Unreplied, u.UnrepliedMax)
}

// serviceUDP is a UDP service's pair counts in xlbctl status: "812 pairs
// (40 unreplied, cap 65536), opened 9990, expired 9178 (120 unreplied),
// over cap 7".
func serviceUDP(u api.ServiceUDP) string {
	e := u.ExpiredTotal
	return fmt.Sprintf("%s, opened %d, expired %d (%d unreplied), over cap %d",
		udpSummary(u), u.OpenedTotal, e.Unreplied+e.Replied, e.Unreplied, u.OverCapTotal)
}

// hasUDP: the document has a UDP service, or UDP pair counts (a UDP
// service a reload removed whose id was freed).
func hasUDP(d *api.Document) bool {
	for _, svc := range d.Services {
		if svc.UDP != nil {
			return true
		}
	}
	return d.UDPPairs != (api.UDPPairs{})
}

// udpPairs is the instance's UDP pairs in xlbctl status: "active 812
// (40 unreplied), opened 9990, expired 9178 (120 unreplied), over cap 7,
// no backend 2, fragments passed 3 (every UDP service)".
func udpPairs(u api.UDPPairs) string {
	e := u.ExpiredTotal
	return fmt.Sprintf("active %d (%d unreplied), opened %d, expired %d (%d unreplied), over cap %d, no backend %d, fragments passed %d (every UDP service)",
		u.Active, u.Unreplied, u.OpenedTotal, e.Unreplied+e.Replied, e.Unreplied, u.OverCapTotal, u.NoBackendTotal, u.FragmentsPassedTotal)
}

// backendPairs is what a backend's ACTIVE and OPENED columns count:
// its connections, or its UDP pairs in a UDP service.
func backendPairs(b api.Backend) (active, opened uint64) {
	if u := b.UDP; u != nil {
		return u.PairsActive, u.OpenedTotal
	}
	return b.ActiveConnections, b.OpenedTotal
}
