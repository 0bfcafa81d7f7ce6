package floor

import (
	"fmt"
	"net"
	"net/netip"
)

// rodata checks c and builds the program's read-only configuration,
// struct floor_lb_config, with each backend's checksum deltas.
func (c BalancerConfig) rodata() (floorLBFloorLbConfig, error) {
	var r floorLBFloorLbConfig
	if err := c.check(); err != nil {
		return r, err
	}
	vip, snat, client := nativeBE32(c.VIP.As4()), nativeBE32(c.SNAT.As4()), nativeBE32(c.Client.As4())
	port := nativeBE16(c.Port)
	r.VipBe, r.SnatBe, r.ClientBe, r.PortBe = vip, snat, client, port
	r.SelfMac, r.ClientMac = [6]byte(c.SelfMAC), [6]byte(c.ClientMAC)
	r.N_backends = uint32(len(c.Backends))
	for i, be := range c.Backends {
		ip, bport := nativeBE32(be.IP.As4()), nativeBE16(be.Port)
		o := &r.Backends[i]
		o.IpBe, o.PortBe, o.Mac = ip, bport, [6]byte(be.MAC)
		// client:cport -> VIP:port into SNAT:cport -> ip:bport; the client
		// port stays (its words cancel whatever it is: ~x + x).
		o.FwdCsumIp, o.FwdCsumL4 = rewrite{fromSaddr: client, fromDaddr: vip, toSaddr: snat, toDaddr: ip,
			fromDport: port, toDport: bport}.deltas()
		// ip:bport -> SNAT:cport into VIP:port -> client:cport.
		o.RevCsumIp, o.RevCsumL4 = rewrite{fromSaddr: ip, fromDaddr: snat, toSaddr: vip, toDaddr: client,
			fromSport: bport, toSport: port}.deltas()
	}
	return r, nil
}

// check refuses what the program cannot serve: non-IPv4 addresses, a zero
// port, no backends or more than MaxBalancerBackends, MACs that are not
// 6 bytes long.
func (c BalancerConfig) check() error {
	for _, a := range []struct {
		name string
		ip   netip.Addr
	}{{"VIP", c.VIP}, {"SNAT", c.SNAT}, {"Client", c.Client}} {
		if !a.ip.Is4() {
			return fmt.Errorf("%w: %s %s is not an IPv4 address", ErrBalancerConfig, a.name, a.ip)
		}
	}
	if c.Port == 0 {
		return fmt.Errorf("%w: port 0", ErrBalancerConfig)
	}
	if len(c.Backends) == 0 || len(c.Backends) > MaxBalancerBackends {
		return fmt.Errorf("%w: %d backends (1..%d)", ErrBalancerConfig, len(c.Backends), MaxBalancerBackends)
	}
	if err := checkMAC("SelfMAC", c.SelfMAC); err != nil {
		return err
	}
	if err := checkMAC("ClientMAC", c.ClientMAC); err != nil {
		return err
	}
	for i, b := range c.Backends {
		if !b.IP.Is4() || b.Port == 0 {
			return fmt.Errorf("%w: backend %d is %s port %d (IPv4 and a port wanted)", ErrBalancerConfig, i, b.IP, b.Port)
		}
		if err := checkMAC(fmt.Sprintf("backend %d MAC", i), b.MAC); err != nil {
			return err
		}
	}
	return nil
}

func checkMAC(name string, m net.HardwareAddr) error {
	if len(m) != 6 {
		return fmt.Errorf("%w: %s %q is not a 6-byte Ethernet address", ErrBalancerConfig, name, m)
	}
	return nil
}
