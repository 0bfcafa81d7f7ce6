package loadgen

import "github.com/xlbproject/xlb/internal/testnet"

// ClientPortRange is the source-port range ReuseSourcePorts gives a client
// namespace: every unprivileged port (nothing listens in a client
// namespace of the lab).
const ClientPortRange = "1024 65535"

// ReuseSourcePorts lets h open new connections at the lab's full rate
// for as long as a run lasts. A client that closes first holds TIME_WAIT
// for 60 s on each of its 4-tuples; with Linux's default 28,232 ephemeral
// ports and the default net.ipv4.tcp_tw_reuse=2 (loopback only) it runs
// out of source ports within seconds at a few thousand connections per
// second (connect fails with EADDRNOTAVAIL), which would measure the
// client and not the path. net.ipv4.tcp_tw_reuse=1 lets connect() take a
// port whose TIME_WAIT is older than 1 s (safe: TCP timestamps tell the
// old segments from the new), and ClientPortRange widens the range.
// Clients therefore reuse their source ports within seconds, as busy real
// clients do, which is the reuse issue 13 is about.
func ReuseSourcePorts(h *testnet.Host) error {
	return h.Do(func() error {
		if err := testnet.Sysctl("net.ipv4.tcp_tw_reuse", "1"); err != nil {
			return err
		}
		return testnet.Sysctl("net.ipv4.ip_local_port_range", ClientPortRange)
	})
}
