// Package lab builds the two throw-away network shapes of XLB's end-to-end
// tests, benchmarks and `make demo` (DESIGN §7) on internal/testnet, which
// owns the namespaces, links, servers and cleanup.
//
// A Lab is built by Start (or New in tests) from Options and removed by
// (*Lab).Close. Every namespace and every link the lab creates has a name
// that starts with Options.Prefix, so leftovers from a crash are easy to
// recognise and testnet.CleanupStale removes them.
//
// Shapes (addresses from testnet's plan; MACs are derived from them):
//
//	OneArm:  client 192.0.2.20 (+.21, .22 …), xlb 192.0.2.10 (eth0),
//	         backends 192.0.2.31, .32, .33 …, all on one bridge in "lan".
//	TwoArm:  front bridge "lan-front": clients 192.0.2.20 …, xlb eth0 192.0.2.10;
//	         back bridge "lan-back": xlb eth1 198.51.100.1, backends
//	         198.51.100.11, .12, .13 …. Clients route via 192.0.2.10,
//	         backends via 198.51.100.1.
//
// Endpoint interfaces live only inside their namespaces (veth pairs are
// created directly across namespaces, never in the root namespace) and are
// named eth0 (and eth1 for the two-arm XLB). Their bridge-side peers are
// named PREFIX-TAG and carry a native XDP_PASS program so that native
// XDP_TX and redirects from the XLB namespace are delivered. Endpoints have
// TX checksum offload off. The XLB namespace gets no XDP program: the
// daemon under test attaches its own.
//
// Backends run an echo server and a sink server (testnet.Echo and
// testnet.Sink), and on the same UDP ports their UDP counterparts
// (testnet.UDPEcho and testnet.UDPSink).
package lab
