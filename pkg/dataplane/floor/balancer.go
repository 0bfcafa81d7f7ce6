package floor

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// BalancerConfig is the floor balancer's whole configuration (bpf/floor_lb.c):
// one virtual service VIP:Port, one client address, up to MaxBalancerBackends
// backends on the balancing interface's segment (one-arm: every frame leaves
// by XDP_TX through the interface it came in on). Addresses are IPv4.
type BalancerConfig struct {
	VIP, SNAT, Client netip.Addr // SNAT may equal VIP (the one-arm lab's 192.0.2.10)
	Port              uint16     // the service port, not 0
	Backends          []BalancerBackend
	SelfMAC           net.HardwareAddr // the balancing interface's own address: frames must be addressed to it
	ClientMAC         net.HardwareAddr // next hop toward the client
}

// BalancerBackend is one backend: its address, port (not 0) and MAC (the
// next hop toward it).
type BalancerBackend struct {
	IP   netip.Addr
	Port uint16
	MAC  net.HardwareAddr
}

// MaxBalancerBackends bounds BalancerConfig.Backends (FLOOR_LB_MAX_BACKENDS).
const MaxBalancerBackends = int(floorLBFloorLbLimitsFLOOR_LB_MAX_BACKENDS)

// ErrBalancerConfig wraps every configuration LoadBalancer refuses.
var ErrBalancerConfig = errors.New("floor balancer: bad configuration")

// BackendIndex is the index in Backends of the backend that a connection
// from client port cport goes to, as the program picks it: Fibonacci
// hashing of the port, then Lemire's multiply-shift reduction to
// 0..len(Backends)-1. It is -1 without backends.
func (c BalancerConfig) BackendIndex(cport uint16) int {
	n := uint64(len(c.Backends))
	if n == 0 {
		return -1
	}
	h := uint32(cport) * uint32(floorLBFloorLbLimitsFLOOR_LB_HASH_MUL)
	return int((uint64(h) * n) >> 32)
}

// Balancer is the loaded floor balancer program. Its configuration is
// read-only data, fixed when it loads.
type Balancer struct {
	objs floorLBObjects
}

// LoadBalancer checks c and loads the floor balancer with it. Errors wrap
// ErrBalancerConfig for a configuration it refuses, or are the kernel's.
func LoadBalancer(c BalancerConfig) (*Balancer, error) {
	rc, err := c.rodata()
	if err != nil {
		return nil, err
	}
	spec, err := loadFloorLB()
	if err != nil {
		return nil, fmt.Errorf("floor balancer: %w", err)
	}
	v, ok := spec.Variables[floorLBVarFloorLbCfg]
	if !ok {
		return nil, fmt.Errorf("floor balancer: no %s in the object", floorLBVarFloorLbCfg)
	}
	if err := v.Set(rc); err != nil {
		return nil, fmt.Errorf("floor balancer: configure: %w", err)
	}
	b := &Balancer{}
	if err := spec.LoadAndAssign(&b.objs, nil); err != nil {
		return nil, fmt.Errorf("floor balancer: load: %w", err)
	}
	return b, nil
}

// Program is the XDP program.
func (b *Balancer) Program() *ebpf.Program { return b.objs.FloorLbXdp }

// Attach attaches the program to the interface ifindex in mode flags
// (link.XDPDriverMode, link.XDPGenericMode, or 0 for the kernel's choice).
// Closing the link detaches it.
func (b *Balancer) Attach(ifindex int, flags link.XDPAttachFlags) (link.Link, error) {
	l, err := link.AttachXDP(link.XDPOptions{Program: b.objs.FloorLbXdp, Interface: ifindex, Flags: flags})
	if err != nil {
		return nil, fmt.Errorf("floor balancer: attach to ifindex %d: %w", ifindex, err)
	}
	return l, nil
}

// Close releases the program; a link made by Attach keeps it until the
// link is closed.
func (b *Balancer) Close() error { return b.objs.Close() }
