// Package loadgen drives the lab traffic of issue 13's capacity and
// hostile-traffic tests and of the churn benchmark, from inside a
// testnet.Host:
//
//   - churn.go: Run, N workers that each connect, send one request, read
//     the reply and close, in a loop for a fixed time, with either side
//     closing first (CloseOrder); result.go: what a run measured
//     (completions per window, connect latencies, failures by kind);
//     failure.go: the kinds of failure.
//   - ports.go: ReuseSourcePorts, the client sysctls that let one client
//     namespace open connections at a high rate.
//   - flood.go: a hping3 SYN flood with random source addresses.
//   - udp.go: RunUDP, a DNS-style UDP load: one socket per client port,
//     each a sequence of request and reply exchanges (issue 31).
//
// The servers the workers talk to are testnet.Respond servers. Everything
// here needs root (network namespaces, raw sockets).
package loadgen
