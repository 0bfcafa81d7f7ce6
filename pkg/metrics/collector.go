package metrics

import (
	"errors"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/xlbproject/xlb/pkg/snapshot"
)

// collector builds one concern's series from one snapshot, the way a
// node_exporter collector does (Update(ch) error).
type collector interface {
	// describe sends every descriptor the collector may use.
	describe(ch chan<- *prometheus.Desc)
	// update sends the series built from s, which is nil before the
	// daemon's first publish. It returns errNoData when s does not hold
	// the collector's source yet, and another error when s records the
	// source as unreadable (its series are then left out). Series that
	// need no source (xlb_build_info, an empty duration histogram) are
	// sent in every case.
	update(s *snapshot.Snapshot, ch chan<- prometheus.Metric) error
}

// errNoData is what a collector returns while its source is not in the
// snapshot yet (nothing published, no maintenance sample, no counter
// read): its series and its success series are left out, quietly, so a
// dashboard does not mistake "not measured yet" for zero or for a failure.
var errNoData = errors.New("metrics: no data yet")

// source is one registered collector: its name, the label value of
// xlb_scrape_collector_success, and what it reads, for the log.
type source struct {
	name    string // collector label value
	what    string // "data path counters": logged when unreadable
	c       collector
	failing atomic.Bool
}

// collectorSet is the prometheus.Collector behind every XLB series. Each
// scrape loads the latest snapshot once and runs every collector over it,
// so all series of one scrape come from the same snapshot, the one the
// status API shows too. It adds xlb_scrape_collector_success{collector}
// for each collector with data: 1 when it exported its series, 0 when the
// snapshot says its source could not be read (the first failure is logged
// as a warning, the recovery as info).
type collectorSet struct {
	store   snapshot.Source
	log     logrus.FieldLogger
	sources []*source
	success *prometheus.Desc
}

func newCollectorSet(store snapshot.Source, log logrus.FieldLogger, sources ...*source) *collectorSet {
	return &collectorSet{store: store, log: log, sources: sources,
		success: prometheus.NewDesc("xlb_scrape_collector_success",
			"1 when the collector read its source in this scrape, 0 when it failed (the error is logged).",
			[]string{"collector"}, nil)}
}

// Describe implements prometheus.Collector.
func (sc *collectorSet) Describe(ch chan<- *prometheus.Desc) {
	for _, src := range sc.sources {
		src.c.describe(ch)
	}
	ch <- sc.success
}

// Collect implements prometheus.Collector.
func (sc *collectorSet) Collect(ch chan<- prometheus.Metric) {
	s := sc.store.Load()
	for _, src := range sc.sources {
		err := src.c.update(s, ch)
		if errors.Is(err, errNoData) {
			continue
		}
		gauge(ch, sc.success, boolValue(err == nil), src.name)
		switch {
		case err != nil && !src.failing.Swap(true):
			sc.log.WithError(err).Warnf("metrics: cannot read the %s; their series are left out until the read succeeds", src.what)
		case err == nil && src.failing.Swap(false):
			sc.log.Infof("metrics: %s readable again", src.what)
		}
	}
}

// descs are a collector's descriptors; add creates one and keeps it for
// describe, so no descriptor is left undescribed.
type descs []*prometheus.Desc

func (d *descs) add(name, help string, labels ...string) *prometheus.Desc {
	desc := prometheus.NewDesc(name, help, labels, nil)
	*d = append(*d, desc)
	return desc
}

func (d descs) describe(ch chan<- *prometheus.Desc) {
	for _, desc := range d {
		ch <- desc
	}
}

// gauge and counter send one constant series.
func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v uint64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
