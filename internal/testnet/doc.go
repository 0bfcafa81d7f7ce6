// Package testnet builds throw-away networks out of Linux network
// namespaces, veth pairs and bridges for XLB's tests, benchmarks and
// `make demo`: the lab (test/lab), the fleet (test/fleet), the packet
// fixtures (pkg/dataplane/dptest) and the demo all build on it.
//
// The pieces, one file each:
//
//   - netns.go: run a function on an OS thread switched into a namespace
//     (In) and create anonymous namespaces (NewAnon); named.go: named
//     namespaces under NetnsDir, as `ip netns add` makes them.
//   - topology.go: a Topology of named namespaces (Host) whose names start
//     with one prefix, built step by step (Build) and removed by Close,
//     also after a failed build; veth.go: veth pairs across namespaces.
//   - dial.go, servers.go, handlers.go: TCP from inside a Host, and
//     servers that count every connection and byte (Echo, Sink, Respond);
//     udp.go: UDP servers that count every datagram (UDPEcho, UDPNameEcho,
//     UDPSink) and connected UDP sockets from inside a Host.
//   - rawsock.go: a raw IPv4 socket (spoofed packets) and a capture of an
//     interface's frames; iptables.go: the kernel's NAT as a balancer
//     (the churn benchmark's reference).
//   - loadgen/: the traffic of the capacity and hostile-traffic tests
//     (connection churn, a hping3 SYN flood) from inside a Host.
//   - addrs.go: the one address plan (documentation ranges only, RFC 5737)
//     and the MACs derived from addresses.
//   - cleanup.go: removal of leftovers by prefix (CleanupStale) and of a
//     running topology on SIGINT/SIGTERM (CloseOnSignal).
//   - xdppass.go: the XDP_PASS program on bridge-side veth ends;
//     offload.go: TX checksum offload; sysctl.go: per-namespace sysctls;
//     netstat.go: per-namespace TCP and IP counters (/proc/net/netstat).
//
// Names: a Topology's namespaces are PREFIX-ROLE and its links PREFIX-TAG
// (at most 15 characters), so each test picks its own prefix
// (RandomPrefix) and leftovers of a crash are recognisable. Links live only
// inside the topology's namespaces and vanish with them.
//
// Everything here needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN, CAP_BPF).
package testnet
