package testnet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// NATBalancer makes h balance TCP connections to vip over backends with
// the kernel's NAT (nf_conntrack DNAT and SNAT), the way kube-proxy's
// iptables mode does: a service chain picks an endpoint chain at random
// (-m statistic, probability 1/n, 1/(n-1), …, 1), the endpoint chain
// marks the packet and DNATs it, and POSTROUTING masquerades marked
// packets (MASQUERADE --random-fully: random source ports). vip must be
// an address of h; h forwards (ip_forward) and sends no ICMP redirects
// (one-arm: packets leave on the interface they came in on). It is the
// reference path of the churn benchmark (issue 13); the rules go with the
// namespace. Needs iptables-restore (Debian package iptables).
func (h *Host) NATBalancer(vip netip.AddrPort, backends []netip.AddrPort) error {
	return h.NATBalancerProto(vip, backends, "tcp")
}

// NATBalancerProto is NATBalancer for proto "tcp" or "udp" (issue 31: a
// UDP service's datagrams, one conntrack entry per client address and
// port). A host balances several services: one call each, every
// (proto, vip port) once.
func (h *Host) NATBalancerProto(vip netip.AddrPort, backends []netip.AddrPort, proto string) error {
	if len(backends) == 0 {
		return errors.New("testnet: NATBalancer without backends")
	}
	if proto != "tcp" && proto != "udp" {
		return fmt.Errorf("testnet: NATBalancer: proto %q, want tcp or udp", proto)
	}
	if err := h.natForwarding(); err != nil {
		return err
	}
	// The chains every service shares exist after the host's first one.
	first := h.Command(context.Background(), "iptables", "-t", "nat", "-n", "-L", "XLB-SERVICES").Run() != nil
	cmd := h.Command(context.Background(), "iptables-restore", "--noflush")
	cmd.Stdin = strings.NewReader(natRules(vip, backends, proto, first))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("testnet: iptables-restore (Debian package iptables) in %s: %w\n%s", h.NS, err, out)
	}
	return nil
}

// natForwarding makes h a one-arm router for the kernel NAT balancers:
// ip_forward on, no ICMP redirects (packets leave on the interface they
// came in on).
func (h *Host) natForwarding() error {
	settings := [][2]string{{"net.ipv4.ip_forward", "1"}, {"net.ipv4.conf.all.send_redirects", "0"}, {"net.ipv4.conf.default.send_redirects", "0"}}
	for _, ifc := range h.Ifaces {
		settings = append(settings, [2]string{"net.ipv4.conf." + ifc.Name + ".send_redirects", "0"})
	}
	return h.Do(func() error {
		for _, kv := range settings {
			if err := Sysctl(kv[0], kv[1]); err != nil {
				return err
			}
		}
		return nil
	})
}

// natMark is kube-proxy's masquerade mark.
const natMark = "0x4000/0x4000"

// natRules is the iptables-restore input of NATBalancerProto: the
// service's chains (XLB-SVC-<PROTO>-<port>, XLB-SEP-<PROTO>-<port>-<i>)
// and its rule in XLB-SERVICES; with first, also the chains every service
// shares and their jumps (a declared chain is flushed even under
// --noflush, so they are written once per host).
func natRules(vip netip.AddrPort, backends []netip.AddrPort, proto string, first bool) string {
	var b strings.Builder
	svc := fmt.Sprintf("XLB-SVC-%s-%d", strings.ToUpper(proto), vip.Port())
	sep := func(i int) string { return fmt.Sprintf("XLB-SEP-%s-%d-%d", strings.ToUpper(proto), vip.Port(), i) }
	b.WriteString("*nat\n")
	if first {
		b.WriteString(":XLB-SERVICES - [0:0]\n:XLB-POSTROUTING - [0:0]\n")
	}
	fmt.Fprintf(&b, ":%s - [0:0]\n", svc)
	for i := range backends {
		fmt.Fprintf(&b, ":%s - [0:0]\n", sep(i))
	}
	if first {
		b.WriteString("-A PREROUTING -j XLB-SERVICES\n-A OUTPUT -j XLB-SERVICES\n-A POSTROUTING -j XLB-POSTROUTING\n")
	}
	fmt.Fprintf(&b, "-A XLB-SERVICES -d %s/32 -p %s -m %[2]s --dport %d -j %s\n", vip.Addr(), proto, vip.Port(), svc)
	for i := range backends {
		if left := len(backends) - i; left > 1 {
			fmt.Fprintf(&b, "-A %s -m statistic --mode random --probability %.11f -j %s\n", svc, 1/float64(left), sep(i))
		} else {
			fmt.Fprintf(&b, "-A %s -j %s\n", svc, sep(i))
		}
	}
	for i, be := range backends {
		fmt.Fprintf(&b, "-A %s -j MARK --set-xmark %s\n", sep(i), natMark)
		fmt.Fprintf(&b, "-A %s -p %s -m %[2]s -j DNAT --to-destination %s\n", sep(i), proto, be)
	}
	if first {
		fmt.Fprintf(&b, "-A XLB-POSTROUTING -m mark ! --mark %s -j RETURN\n", natMark)
		b.WriteString("-A XLB-POSTROUTING -j MARK --xor-mark 0x4000\n")
		b.WriteString("-A XLB-POSTROUTING -j MASQUERADE --random-fully\n")
	}
	b.WriteString("COMMIT\n")
	return b.String()
}
