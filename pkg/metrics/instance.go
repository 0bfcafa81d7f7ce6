package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xlbproject/xlb/pkg/buildinfo"
	"github.com/xlbproject/xlb/pkg/snapshot"
)

// lifecycleStates are the values of xlb_lifecycle_state{state} (DESIGN §3).
var lifecycleStates = []string{snapshot.Starting, snapshot.Running, snapshot.ShuttingDown}

// instanceCollector exports what the instance is and how it is set up:
// build, service name, lifecycle, readiness, XDP attachments and the
// config watcher's findings (DESIGN §1 last paragraph, §3, §4).
type instanceCollector struct {
	store *snapshot.Store
	now   func() time.Time

	buildInfo, serviceInfo, lifecycle, ready   *prometheus.Desc
	attached                                   *prometheus.Desc
	restartRequired, configInvalid, configGone *prometheus.Desc
}

func newInstanceCollector(store *snapshot.Store, now func() time.Time) *instanceCollector {
	return &instanceCollector{
		store: store, now: now,
		buildInfo: prometheus.NewDesc("xlb_build_info",
			"A metric with a constant '1' value labeled by the version and VCS revision xlb was built from.",
			[]string{"version", "revision"}, nil),
		serviceInfo: prometheus.NewDesc("xlb_service_info",
			"A metric with a constant '1' value labeled by the service name from xlb.yaml (name).",
			[]string{"name"}, nil),
		lifecycle: prometheus.NewDesc("xlb_lifecycle_state",
			"Lifecycle state of the instance: 1 for the current state (starting, running, shutting_down), 0 for the others.",
			[]string{"state"}, nil),
		ready: prometheus.NewDesc("xlb_ready",
			"1 when /readyz answers 200, 0 otherwise (the reason is in /readyz and the status API).",
			nil, nil),
		attached: prometheus.NewDesc("xlb_xdp_attached",
			"A metric with a constant '1' value for each interface the XDP program is attached to, labeled by the attach mode in use (native or generic).",
			[]string{"interface", "mode"}, nil),
		restartRequired: prometheus.NewDesc("xlb_config_restart_required",
			"1 when the config file on disk is valid and differs from the loaded config; the running instance applies it only after a restart.",
			nil, nil),
		configInvalid: prometheus.NewDesc("xlb_config_file_invalid",
			"1 when the config file on disk fails validation; the running instance keeps its loaded config.",
			nil, nil),
		configGone: prometheus.NewDesc("xlb_config_file_missing",
			"1 when the config file was deleted; the running instance keeps its loaded config.",
			nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *instanceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.buildInfo, c.serviceInfo, c.lifecycle, c.ready,
		c.attached, c.restartRequired, c.configInvalid, c.configGone} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *instanceCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.buildInfo, prometheus.GaugeValue, 1, buildinfo.Version, buildinfo.Revision)
	s := c.store.Load()
	if s == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.serviceInfo, prometheus.GaugeValue, 1, s.Name)
	for _, st := range lifecycleStates {
		ch <- prometheus.MustNewConstMetric(c.lifecycle, prometheus.GaugeValue, boolValue(s.Lifecycle == st), st)
	}
	ready, _ := s.Readiness(c.now())
	ch <- prometheus.MustNewConstMetric(c.ready, prometheus.GaugeValue, boolValue(ready))
	for _, a := range s.Attached {
		ch <- prometheus.MustNewConstMetric(c.attached, prometheus.GaugeValue, 1, a.Interface, string(a.Mode))
	}
	ch <- prometheus.MustNewConstMetric(c.restartRequired, prometheus.GaugeValue, boolValue(s.Config.RestartRequired))
	ch <- prometheus.MustNewConstMetric(c.configInvalid, prometheus.GaugeValue, boolValue(s.Config.Invalid != ""))
	ch <- prometheus.MustNewConstMetric(c.configGone, prometheus.GaugeValue, boolValue(s.Config.Missing))
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
