package main

import (
	"context"
	"net/netip"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/test/lab"
)

// load is one workload, measured through every peer.
type load struct {
	name  string
	title string // the report's heading
	about string // how it loads, for the report
	unit  string // of sample.value; more is better
	op    string // what sample.ops counts, for CPU time per operation
	// clients is the number of client namespaces it needs (0: 1).
	clients int
	// clientAddrs, when set, is the number of addresses the first client
	// connects from (lab.Lab's AddClientAddresses), in turn.
	clientAddrs int
	// long loads run -long-reps times instead of -reps.
	long bool
	// pairs: the load holds -idle-pairs connections open through the peer.
	pairs bool
	// handler is what the backends serve on backendPort, in this process;
	// servers, when set, starts the backends' servers instead.
	handler testnet.Handler
	servers func(e *env, l *lab.Lab) (stop func() error, err error)
	// run measures the load from l's clients to targets (round robin).
	run func(ctx context.Context, o options, l *lab.Lab, targets []netip.AddrPort) (sample, error)

	// A UDP load (issue 31) sets udpHandler, what the backends serve on
	// backendPort/udp, and runUDP instead of handler, servers and run; its
	// peers balance UDP (peer.udp).
	udpHandler testnet.UDPHandler
	runUDP     func(ctx context.Context, o options, l *lab.Lab, targets []netip.AddrPort, servers []*testnet.UDPServer) (sample, error)
}

// isUDP reports whether l is a UDP load.
func (l load) isUDP() bool { return l.udpHandler != nil }

// sample is one measurement of a load through a peer.
type sample struct {
	value    float64       // in load.unit
	ops      float64       // operations done while the CPU was measured
	p50, p99 time.Duration // latency; 0 when the load has none
	windows  []float64     // long loads: value per window
	failed   int           // failed connections or requests
	cpu      cpuUse        // the host during the measured part
	note     string
	// xdpPerPacket is the XDP program's average run time per packet over
	// the whole load (xdpstats.go), xdpPackets the packets it ran on; 0
	// for a peer that is no XDP program.
	xdpPerPacket time.Duration
	xdpPackets   uint64

	// failures counts failed connections by kind (loadgen.Failure's
	// names: refused, connect-timeout, reset, io-timeout, …).
	failures map[string]int
}

// loads in the report's order.
var loads = []load{
	churnLoad("conn-server-first", serverFirst, false, 0),
	churnLoad("conn-client-first", clientFirst, false, 0),
	churnLoad("conn-server-first-8addr", serverFirst, false, churnClientAddrs),
	keepaliveLoad(),
	bulkUpLoad(),
	bulkDownLoad(),
	udpRRLoad(),
	udpBulkLoad(),
	churnLoad("conn-server-first-long", serverFirst, true, 0),
	churnLoad("conn-client-first-long", clientFirst, true, 0),
	churnLoad("conn-server-first-8addr-long", serverFirst, true, churnClientAddrs),
	idleLoad(),
}

func (l load) key() string { return l.name }

func loadNames() []string { return names(loads) }

// loadByName is the load called name (parseOptions checked the names).
func loadByName(name string) load { return byName(loads, name) }

// roundRobin hands out targets in turn.
type roundRobin struct {
	targets []netip.AddrPort
	next    int
}

func (r *roundRobin) pick() netip.AddrPort {
	t := r.targets[r.next%len(r.targets)]
	r.next++
	return t
}
