package lab

import (
	"fmt"

	"github.com/xlbproject/xlb/internal/testnet"
)

// Topology selects the shape of a lab.
type Topology int

const (
	// OneArm puts clients, XLB and backends on one bridge (192.0.2.0/24);
	// XLB answers with XDP_TX on its single interface eth0.
	OneArm Topology = iota
	// TwoArm puts clients on 192.0.2.0/24 and backends on 198.51.100.0/24,
	// with XLB (eth0 and eth1) between them; the backends route through it.
	TwoArm
)

func (t Topology) String() string {
	switch t {
	case OneArm:
		return "one-arm"
	case TwoArm:
		return "two-arm"
	}
	return fmt.Sprintf("Topology(%d)", int(t))
}

// Limits on Options, from testnet's address plan and link names.
const (
	MaxClients   = testnet.MaxClients   // clients take .20 … .29
	MaxBackends  = testnet.MaxBackends  // backends take .31 … (one-arm) or .11 … (two-arm)
	MaxPrefixLen = testnet.MaxPrefixLen // the longest link name is PREFIX + "-" + 3 chars ≤ 15
)

// Default values for zero Options fields.
const (
	DefaultEchoPort = 8080
	DefaultSinkPort = 8081
)

// Options describe a lab. The zero value is a one-arm lab with one client,
// three backends, echo on 8080, sink on 8081 and a random prefix.
type Options struct {
	Topology Topology
	// Clients is the number of client namespaces, 1…MaxClients (0 means 1).
	Clients int
	// Backends is the number of backend namespaces, 1…MaxBackends (0 means 3).
	Backends int
	// Prefix starts every namespace and link name: 1…MaxPrefixLen
	// characters from [a-z0-9]. Empty means "xl" + 6 random hex digits.
	Prefix string
	// EchoPort and SinkPort are the backend server ports, TCP and UDP (0
	// means the defaults; -1 disables that server).
	EchoPort, SinkPort int
	// IPv6 leaves IPv6 enabled in the namespaces. By default the lab
	// disables it so that no router solicitations, DAD or MLD frames show
	// up in packet tests (XLB is IPv4-only for now).
	IPv6 bool

	// failAt, set by tests only, makes construction fail at the named step.
	failAt string
}

// withDefaults fills zero fields and validates the result.
func (o Options) withDefaults() (Options, error) {
	if o.Topology != OneArm && o.Topology != TwoArm {
		return o, fmt.Errorf("lab: unknown topology %d", int(o.Topology))
	}
	if o.Clients == 0 {
		o.Clients = 1
	}
	if o.Backends == 0 {
		o.Backends = 3
	}
	if o.Clients < 1 || o.Clients > MaxClients {
		return o, fmt.Errorf("lab: %d clients, want 1…%d", o.Clients, MaxClients)
	}
	if o.Backends < 1 || o.Backends > MaxBackends {
		return o, fmt.Errorf("lab: %d backends, want 1…%d", o.Backends, MaxBackends)
	}
	if o.EchoPort == 0 {
		o.EchoPort = DefaultEchoPort
	}
	if o.SinkPort == 0 {
		o.SinkPort = DefaultSinkPort
	}
	for _, p := range []int{o.EchoPort, o.SinkPort} {
		if p != -1 && (p < 1 || p > 65535) {
			return o, fmt.Errorf("lab: server port %d, want 1…65535 or -1", p)
		}
	}
	if o.EchoPort == o.SinkPort && o.EchoPort != -1 {
		return o, fmt.Errorf("lab: echo and sink share port %d", o.EchoPort)
	}
	if o.Prefix == "" {
		p, err := testnet.RandomPrefix("xl")
		if err != nil {
			return o, err
		}
		o.Prefix = p
	}
	return o, testnet.ValidatePrefix(o.Prefix)
}
