package metrics

import (
	"runtime"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xlbproject/xlb/pkg/buildinfo"
	"github.com/xlbproject/xlb/pkg/snapshot"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// instanceCollector exports what the instance is and how it is set up:
// build, instance name, lifecycle, readiness (the instance's and each
// service's), the services' states, XDP attachments, the config
// watcher's findings and how the process took the data path (hot upgrades
// and adopted pairs, snapshot.Upgrades; a provider stale on an inherited
// routable set, issue 28) and the repairs of the host
// settings it guards (snapshot.HostSettings) (DESIGN §1 last paragraph,
// §3, §4, §6; issue 13), and the retired SNAT ranges live connections may
// still hold (snapshot.RetiredSNAT; issue 27).
type instanceCollector struct {
	descs
	now func() time.Time

	buildInfo, serviceInfo, lifecycle, ready  *prometheus.Desc
	attached                                  *prometheus.Desc
	reloadRequired, configInvalid, configGone *prometheus.Desc
	hotUpgrades, adoptedPairs, drained        *prometheus.Desc
	settingRepairs, providerStale             *prometheus.Desc

	retiredPorts *prometheus.Desc

	serviceReady, serviceState *prometheus.Desc
}

func newInstanceCollector(now func() time.Time) *instanceCollector {
	c := &instanceCollector{now: now}
	c.buildInfo = c.add("xlb_build_info", "A metric with a constant '1' value labeled by version, revision, branch, goversion from which xlb was built, and the goos and goarch for the build (the labels of client_golang's version collector; tags: the Go build tags).", buildInfoLabels...)
	c.serviceInfo = c.add("xlb_service_info", "A metric with a constant '1' value labeled by the service name from xlb.yaml (name).", "name")
	c.lifecycle = c.add("xlb_lifecycle_state", "Lifecycle state of the instance: 1 for the current state ("+lifecycleNames()+"), 0 for the others.", "state")
	c.ready = c.add("xlb_ready", "1 when /readyz answers 200 (every service is ready), 0 otherwise (the reason is in /readyz and the status API).")
	c.serviceReady = c.add("xlb_service_ready", "1 when /readyz?service=NAME answers 200 for the service (the instance and the service are ready; the BGP speaker announces its address), 0 otherwise (the reason is in the status API's services[].readiness).", "service")
	c.serviceState = c.add("xlb_service_state", "State of each service in the data path: 1 for the current state (serving: in the config; draining: removed by a reload, its connections flowing until they end, new ones passed to the kernel), 0 for the other.", "service", "state")
	c.reloadRequired = c.add("xlb_config_reload_required", "1 when the config file on disk is valid and differs from the loaded config; systemctl reload xlb (a hot upgrade) applies it, no connection is lost.")
	c.configInvalid = c.add("xlb_config_file_invalid", "1 when the config file on disk fails validation; the running instance keeps its loaded config.")
	c.configGone = c.add("xlb_config_file_missing", "1 when the config file was deleted; the running instance keeps its loaded config.")
	c.hotUpgrades = c.add("xlb_hot_upgrades_total", "Hot upgrades (SIGUSR2 hand-offs: systemctl reload xlb) by result: ok when a new process took over, failed when it did not and the old one kept serving. Counted since the pinned state was created, across hand-offs and crashes; a stop with SIGTERM removes the pins and starts the count anew.", "result")
	c.drained = c.add("xlb_drained", "1 while an operator has drained the instance (POST /api/v1/drain, xlbctl drain): readiness answers draining while every packet is still forwarded.")
	c.providerStale = c.add("xlb_backend_provider_stale", "1 while the service's backend provider has not synced and the service is served with the routable set handed over or adopted from the previous xlb process (a reload or a crash-restart while the Kubernetes API is unreachable): it counts as synced, readiness stays ready; 0 otherwise.", "service")
	c.adoptedPairs = c.add("xlb_adopted_connection_pairs", "Connection pairs found in the pinned flow map when this process started (handed over, or adopted after a crash or restart); 0 for a fresh start.")
	c.settingRepairs = c.add("xlb_host_setting_repairs_total", "Resets of a host setting XLB needs (net.ipv4.conf.lo.forwarding, net.ipv4.ip_local_reserved_ports) that the instance found and put back (checked once a second; each repair is logged as one warning), since the instance started.", "setting")
	c.retiredPorts = c.add("xlb_snat_retired_ports", "Ports of the retired SNAT ranges, every address's together: SNAT addresses and ports an earlier config handed out (before a reload that changed snat.ip or snat.port_range) that live connections may still hold; they stay recognised and reserved until none does (status snat.retired names them).")
	c.attached = c.add("xlb_xdp_attached", "A metric with a constant '1' value for each interface the XDP program is attached to, labeled by the attach mode in use (native or generic).", "interface", "mode")
	return c
}

// update implements collector; xlb_build_info needs no snapshot.
func (c *instanceCollector) update(s *snapshot.Snapshot, ch chan<- prometheus.Metric) error {
	gauge(ch, c.buildInfo, 1, buildinfo.Version, buildinfo.Revision, buildinfo.Branch, buildinfo.GoVersion, runtime.GOOS, runtime.GOARCH, buildinfo.Tags())
	if s == nil {
		return errNoData
	}
	gauge(ch, c.serviceInfo, 1, s.Name)
	for _, st := range api.Lifecycles() {
		gauge(ch, c.lifecycle, boolValue(s.Lifecycle == st), string(st))
	}
	now := c.now()
	ready, _ := s.Readiness(now)
	gauge(ch, c.ready, boolValue(ready))
	for _, svc := range s.ServiceList() {
		gauge(ch, c.serviceReady, boolValue(s.ServiceReady(svc.Name, now)), svc.Name)
		for _, st := range api.ServiceStates() {
			gauge(ch, c.serviceState, boolValue(svc.State == st), svc.Name, string(st))
		}
		gauge(ch, c.providerStale, boolValue(svc.ProviderStale), svc.Name)
	}
	for _, a := range s.Attached {
		gauge(ch, c.attached, 1, a.Interface, string(a.Mode))
	}
	gauge(ch, c.reloadRequired, boolValue(s.Config.ReloadRequired))
	gauge(ch, c.configInvalid, boolValue(s.Config.Invalid != ""))
	gauge(ch, c.configGone, boolValue(s.Config.Missing))
	counter(ch, c.hotUpgrades, s.Upgrades.OK, api.UpgradeOK)
	counter(ch, c.hotUpgrades, s.Upgrades.Failed, api.UpgradeFailed)
	gauge(ch, c.adoptedPairs, float64(s.Upgrades.AdoptedPairs))
	gauge(ch, c.drained, boolValue(s.Drained))
	for _, h := range s.HostSettings {
		counter(ch, c.settingRepairs, h.Repairs, h.Name)
	}
	retired := 0
	for _, r := range s.RetiredSNAT {
		retired += int(r.PortHi) - int(r.PortLo) + 1
	}
	gauge(ch, c.retiredPorts, float64(retired))
	return nil
}

// buildInfoLabels are xlb_build_info's labels, in update's order: those of
// client_golang's collectors/version, from prometheus/common/version's
// fields (pkg/buildinfo fills them in).
var buildInfoLabels = []string{"version", "revision", "branch", "goversion", "goos", "goarch", "tags"}

// lifecycleNames lists the lifecycle states for xlb_lifecycle_state's help.
func lifecycleNames() string {
	names := make([]string, 0, len(api.Lifecycles()))
	for _, l := range api.Lifecycles() {
		names = append(names, string(l))
	}
	return strings.Join(names, ", ")
}
