// Command benchpeers is `make bench-peers` (issue 17): it measures XLB
// against its peers in the one-arm lab (test/lab), with the same loads,
// interleaved, and writes a Markdown report, the raw results as JSON and a
// PNG plot to a results directory.
//
// Peers (all serve the virtual service 192.0.2.10:80 -> backends:8080,
// set up in the lab's balancer namespace; for the UDP loads the same over
// UDP, which floor, xlb-default, xlb-baseline, haproxy and nginx sit out):
//
//	direct       no balancer: clients connect to the backends themselves
//	floor        the floor balancer (pkg/dataplane/floor): stateless XDP
//	             full NAT, what XLB would cost if its state were free
//	xlb-native   the xlb daemon, xdp_mode: native, 8 SNAT addresses
//	xlb-default  the same with the packages' snat section (packaging/xlb.yaml:
//	             one address, ports 40000-59999), as an operator who kept the
//	             default runs it (issue 36); the new-connection loads only
//	xlb-generic  the xlb daemon, xdp_mode: generic
//	iptables     nf_conntrack DNAT + SNAT the way kube-proxy does it
//	             (testnet.Host.NATBalancer)
//	nftables     the kernel's NAT through nftables the way kube-proxy's
//	             nftables mode does it (testnet.Host.NFTBalancer: numgen
//	             random vmap, DNAT, masquerade fully-random; Debian
//	             package nftables)
//	haproxy      HAProxy in TCP mode (Debian package haproxy)
//	nginx        nginx stream proxy (Debian packages nginx, libnginx-mod-stream)
//	xlb-baseline with -baseline only: an earlier xlb binary, xdp_mode native,
//	             so a change's before and after are measured in one run
//
// Loads (each in a lab of its own, so no TIME_WAIT, conntrack or flow
// state carries over from one measurement to the next):
//
//	conn-server-first      new connections for -duration, the backend closes
//	                       first (internal/testnet/loadgen, -workers loops)
//	conn-client-first      the same, the client closes first
//	conn-server-first-8addr  conn-server-first from 8 addresses of the
//	                       client in turn (testnet.ClientExtraIP): clients
//	                       whose TCP timestamps are unrelated (issue 36);
//	                       the floor sits it out
//	keepalive              -workers long-lived connections, each a loop of
//	                       64-byte request and echo
//	bulk-up                -streams connections writing to the backends' sink
//	bulk-down              -streams connections reading from a backend source
//	udp-rr                 -workers connected UDP sockets, each a loop of a
//	                       64-byte datagram and its echo (an echo not back in
//	                       200 ms is lost, and the next datagram goes out)
//	udp-bulk               -streams connected UDP sockets sending 1,400-byte
//	                       datagrams unpaced into the backends' UDP sink;
//	                       delivered Gbit/s, the loss in the note
//	conn-server-first-long new connections, backend closes first, for -long in
//	conn-client-first-long -window windows (issue 13's 120 s in 10 s windows)
//	conn-server-first-8addr-long  the same from 8 client addresses
//	idle                   -idle-pairs idle connections from four clients, each
//	                       writing a byte every -trickle, with the keepalive
//	                       load measured on top (does per-packet cost rise
//	                       with table size?). Helper processes (this binary
//	                       started again in a lab namespace, helper.go) hold
//	                       the pairs' sockets: one process may open only
//	                       RLIMIT_NOFILE descriptors (a hard limit of 20,000
//	                       without CAP_SYS_RESOURCE here). The floor takes one
//	                       client address only and sits it out; so does a
//	                       proxy when two descriptors per pair exceed the
//	                       limit
//
// Every repetition runs every load; within a load the peers run one after
// the other, their order rotated by one each repetition. The long loads
// (conn-*-long, idle) run -long-reps times. The report gives per load and
// peer the median value, each ratio to the floor, direct, iptables and
// HAProxy (median and the per-repetition ratios, measured in the same
// repetition), the socket errors (failed connections by kind: refused,
// connect-timeout, reset, io-timeout, ...; in the results file as
// "failures"), p50/p99 latency (connect time for new connections, request
// round trip for keepalive and idle), host CPU busy (all CPUs) during the
// measurement and CPU time per operation, and for the XDP peers the XDP
// program's own run time per packet over each load (the kernel's BPF
// run-time statistics, which the run turns on while it measures:
// xdpstats.go).
//
// Flags (each also read from the environment variable in brackets, a
// flag given on the command line winning):
//
//	-reps N            [BENCH_PEERS_REPS]      repetitions (3)
//	-long-reps N       [BENCH_PEERS_LONG_REPS] repetitions of the long loads (1)
//	-duration D        [BENCH_PEERS_DURATION]  each short load (10s)
//	-long D            [BENCH_PEERS_LONG]      the windowed loads (120s)
//	-window D          [BENCH_PEERS_WINDOW]    their window (10s)
//	-workers N         [BENCH_PEERS_WORKERS]   connection loops, udp-rr sockets (16)
//	-streams N         [BENCH_PEERS_STREAMS]   bulk connections, udp-bulk senders (4)
//	-idle-pairs N      [BENCH_PEERS_IDLE_PAIRS] (100000)
//	-trickle D         [BENCH_PEERS_TRICKLE]   each idle pair's write period (30s)
//	-peers a,b         [BENCH_PEERS_PEERS]     a subset of peers (all)
//	-loads a,b         [BENCH_PEERS_LOADS]     a subset of loads (all)
//	-out DIR           [BENCH_PEERS_OUT]       results directory (a new one under $TMPDIR)
//	-baseline FILE     [BENCH_PEERS_BASELINE]  an earlier xlb binary: adds the peer xlb-baseline
//	-doc FILE          [BENCH_PEERS_DOC]       also write the report there (docs/benchmarks.md),
//	                                           the plot beside it
//	-quick             [BENCH_PEERS_QUICK=1]   development run: 1 repetition, 3 s loads,
//	                                           20 s windowed loads, 10,000 idle pairs
//	                                           (values not set otherwise)
//	-from a.json,b.json                        measure nothing: report on earlier runs'
//	                                           results files, merged (e.g. a run of the
//	                                           idle load added to a run of the others)
//
// It needs root, the Debian packages iptables, nftables, haproxy, nginx and
// libnginx-mod-stream, and runs from inside this module (it builds
// cmd/xlb; XLB_BINARY names a prebuilt one). Nothing it starts is left
// behind: labs, daemons, proxies, helpers and its private bpffs go when it
// ends, also on an error, SIGINT or SIGTERM (lab namespaces start with
// "xbp"; after a SIGKILL testnet.CleanupStale("xbp") removes them).
package main
