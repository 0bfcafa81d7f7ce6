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

	actions, invariant, icmp *prometheus.Desc
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
	c.icmp = c.add("xlb_icmp_translated_total",
		"ICMP errors (destination unreachable, fragmentation needed included, and time exceeded) about a connection pair that the data path translated and sent on, by direction: to_client (from the backend's side toward the client) or to_backend.", "direction")
	c.invariant = c.add("xlb_flow_pair_invariant_violations_total",
		"Half pairs seen: FIN/RST packets the data path met on an entry without a valid counterpart, plus lone entries the maintenance loop repaired, both since the flow map was created.")
	type C = dataplane.Counters
	for _, s := range []struct {
		name, help string
		value      func(*C) uint64
	}{
		{"xlb_snat_port_exhausted_total", "SYNs answered with a RST because no SNAT port was free toward the chosen backend nor toward the routable backends tried after it (xlb_snat_backend_fallbacks_total).", func(n *C) uint64 { return n.SNATExhausted }},
		{"xlb_shutdown_resets_total", "RSTs sent in reply to packets while the shutdown flag was set (shutdown window).", func(n *C) uint64 { return n.ShutdownResets }},
		{"xlb_flow_table_full_total", "SYNs answered with a RST because the flow map was full (flow_table.max_connections).", func(n *C) uint64 { return n.TableFull }},
		{"xlb_no_backend_resets_total", "SYNs answered with a RST because no backend was routable.", func(n *C) uint64 { return n.NoBackend }},
		{"xlb_fib_miss_total", "SYNs dropped because the next hop toward the backend was not resolved.", func(n *C) uint64 { return n.FIBMiss }},
		{"xlb_ttl_exceeded_total", "Balanced packets dropped because their TTL was 1 or less (they would expire when forwarded); such a SYN never creates a pair.", func(n *C) uint64 { return n.TTLExceeded }},
		{"xlb_rst_out_of_window_total", "RSTs dropped because their sequence number lay outside the window last seen for that direction (RFC 5961 §3); the pair lives on.", func(n *C) uint64 { return n.RSTOutOfWindow }},
		{"xlb_rst_inexact_total", "RSTs forwarded without ending their pair: in the receiver's window but not at its next expected sequence as the data path knows it (RFC 5961 §3); the endpoint decides, answering with a challenge ACK unless its own view is ahead.", func(n *C) uint64 { return n.RSTInexact }},
		{"xlb_pair_gone_in_flight_total", "Packets dropped because another CPU replaced or reaped their connection pair while they were rewritten (what the entry held may have been the new pair's); the sender retransmits.", func(n *C) uint64 { return n.PairGoneInFlight }},
		{"xlb_snat_timewait_reuses_total", "SNAT ports held for a backend's TIME_WAIT (it closed first, timestamps negotiated) that a client SYN with timestamps took once the reuse guard had passed: the backend accepts it by its newer timestamps (RFC 6191); the old pair was removed.", func(n *C) uint64 { return n.SNATTimewaitReuses }},
		{"xlb_snat_port_takeovers_total", "SNAT ports a new pair took over from a terminal pair to the same backend that holds no TIME_WAIT for it (the client closed first, or a RST ended it); the old pair was removed.", func(n *C) uint64 { return n.SNATTakeovers }},
		{"xlb_snat_backend_fallbacks_total", "SYNs sent to the next routable backend because the chosen backend had no free SNAT port.", func(n *C) uint64 { return n.SNATFallbacks }},
		{"xlb_scheduler_fallbacks_total", "SYNs of a weighted_round_robin or maglev service that found no usable schedule (none built yet, as right after a reload that changed the scheduler, or an entry beyond the routable set) and were given the round robin pick instead.", func(n *C) uint64 { return n.SchedFallbacks }},
		{"xlb_snat_hold_drops_total", "Packets dropped on a SNAT port held for its backend's TIME_WAIT after its pair ended (the backend closed first) and was replaced by the client's new connection or left its time-wait.", func(n *C) uint64 { return n.HoldDrops }},
		{"xlb_nexthop_refreshes_total", "Packets whose pair's next hop had been freed (unused) or gone stale (a route or neighbour change), so the data path looked it up again.", func(n *C) uint64 { return n.NextHopRefreshes }},
		{"xlb_xdp_not_ours_total", "Frames the data path would have balanced (to the listen address's mapped ports or a SNAT address's port range, or ICMP errors about a pair) that were addressed to another MAC than the ingress interface's, or to a multicast or broadcast address: another host's frames a switch or bridge flooded to this port. Passed to the kernel untouched, which drops them; never balanced or answered.", func(n *C) uint64 { return n.NotOurs }},
		{"xlb_fragments_forwarded_total", "IPv4 fragments of a connection pair forwarded: first fragments, rewritten as any segment, and later fragments that followed their first one.", func(n *C) uint64 { return n.FragsForwarded }},
		{"xlb_fragments_passed_total", "IPv4 TCP fragments to the listen address or a SNAT address passed to the kernel untouched: of no pair, of a SYN (a fragment never creates a pair), or later fragments whose first fragment was not forwarded just before.", func(n *C) uint64 { return n.FragsPassed }},
		{"xlb_ip_options_forwarded_total", "Segments of a connection pair with IPv4 options forwarded, the options copied unchanged.", func(n *C) uint64 { return n.IPOptionsForwarded }},
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
	counter(ch, c.icmp, n.ICMPToClient, "to_client")
	counter(ch, c.icmp, n.ICMPToBackend, "to_backend")
	var repairs uint64
	if s.Sample != nil {
		repairs = s.Sample.InvariantRepairs
	}
	counter(ch, c.invariant, n.InvariantViolations+repairs)
	return nil
}
