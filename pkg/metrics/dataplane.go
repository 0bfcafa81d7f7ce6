package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/snapshot"
)

// xdpActions names dataplane.Counters.Actions by index.
var xdpActions = [dataplane.XDPActions]string{"aborted", "drop", "pass", "tx", "redirect"}

// dataplaneCollector exports the data path's event counters (DESIGN §4,
// §5) as the daemon last read them (snapshot.Snapshot.Counters: with each
// maintenance sample, and each second of the shutdown window). When the
// latest read failed (Snapshot.CountersError) they are left out and
// update fails.
type dataplaneCollector struct {
	descs

	actions, invariant *prometheus.Desc
	// events are the counters exported as they are.
	events []eventSeries
}

// eventSeries is one counter series and its field of dataplane.Counters.
type eventSeries struct {
	desc  *prometheus.Desc
	value func(*dataplane.Counters) uint64
}

func newDataplaneCollector() *dataplaneCollector {
	c := &dataplaneCollector{}
	c.actions = c.add("xlb_xdp_actions_total", "XDP verdicts returned by the XDP program, by action (aborted, drop, pass, tx, redirect).", "action")
	c.invariant = c.add("xlb_flow_pair_invariant_violations_total",
		"Half pairs seen: FIN/RST packets the data path met on an entry without a valid counterpart, plus lone entries the maintenance loop repaired, both since the flow map was created.")
	type C = dataplane.Counters
	for _, s := range []struct {
		name, help string
		value      func(*C) uint64
	}{
		{"xlb_snat_port_exhausted_total", "SYNs answered with a RST because no SNAT port was free toward the chosen backend.", func(n *C) uint64 { return n.SNATExhausted }},
		{"xlb_shutdown_resets_total", "RSTs sent in reply to packets while the shutdown flag was set (shutdown window).", func(n *C) uint64 { return n.ShutdownResets }},
		{"xlb_flow_table_full_total", "SYNs answered with a RST because the flow map was full (flow_table.max_connections).", func(n *C) uint64 { return n.TableFull }},
		{"xlb_no_backend_resets_total", "SYNs answered with a RST because no backend was routable.", func(n *C) uint64 { return n.NoBackend }},
		{"xlb_fib_miss_total", "SYNs dropped because the next hop toward the backend was not resolved.", func(n *C) uint64 { return n.FIBMiss }},
		{"xlb_ttl_exceeded_total", "Packets passed to the host stack because their TTL would expire when forwarded.", func(n *C) uint64 { return n.TTLExceeded }},
		{"xlb_syn_retransmits_total", "Retransmitted SYNs that reused the live pair of their connection.", func(n *C) uint64 { return n.SYNReused }},
		{"xlb_flow_pairs_replaced_total", "Closed or reset pairs replaced by a new SYN on the same tuple.", func(n *C) uint64 { return n.PairsReplaced }},
	} {
		c.events = append(c.events, eventSeries{desc: c.add(s.name, s.help), value: s.value})
	}
	return c
}

// update implements collector.
func (c *dataplaneCollector) update(s *snapshot.Snapshot, ch chan<- prometheus.Metric) error {
	switch {
	case s == nil || s.Counters == nil && s.CountersError == "":
		return errNoData
	case s.CountersError != "":
		return errors.New(s.CountersError)
	}
	n := s.Counters
	for i, a := range xdpActions {
		counter(ch, c.actions, n.Actions[i], a)
	}
	for _, e := range c.events {
		counter(ch, e.desc, e.value(n))
	}
	var repairs uint64
	if s.Sample != nil {
		repairs = s.Sample.InvariantRepairs
	}
	counter(ch, c.invariant, n.InvariantViolations+repairs)
	return nil
}
