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
	if len(backends) == 0 {
		return errors.New("testnet: NATBalancer without backends")
	}
	settings := [][2]string{{"net.ipv4.ip_forward", "1"}, {"net.ipv4.conf.all.send_redirects", "0"}, {"net.ipv4.conf.default.send_redirects", "0"}}
	for _, ifc := range h.Ifaces {
		settings = append(settings, [2]string{"net.ipv4.conf." + ifc.Name + ".send_redirects", "0"})
	}
	err := h.Do(func() error {
		for _, kv := range settings {
			if err := Sysctl(kv[0], kv[1]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	cmd := h.Command(context.Background(), "iptables-restore", "--noflush")
	cmd.Stdin = strings.NewReader(natRules(vip, backends))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("testnet: iptables-restore (Debian package iptables) in %s: %w\n%s", h.NS, err, out)
	}
	return nil
}

// natMark is kube-proxy's masquerade mark.
const natMark = "0x4000/0x4000"

// natRules is the iptables-restore input of NATBalancer.
func natRules(vip netip.AddrPort, backends []netip.AddrPort) string {
	var b strings.Builder
	b.WriteString("*nat\n:XLB-SERVICES - [0:0]\n:XLB-SVC - [0:0]\n:XLB-POSTROUTING - [0:0]\n")
	for i := range backends {
		fmt.Fprintf(&b, ":XLB-SEP-%d - [0:0]\n", i)
	}
	b.WriteString("-A PREROUTING -j XLB-SERVICES\n-A OUTPUT -j XLB-SERVICES\n-A POSTROUTING -j XLB-POSTROUTING\n")
	fmt.Fprintf(&b, "-A XLB-SERVICES -d %s/32 -p tcp -m tcp --dport %d -j XLB-SVC\n", vip.Addr(), vip.Port())
	for i := range backends {
		if left := len(backends) - i; left > 1 {
			fmt.Fprintf(&b, "-A XLB-SVC -m statistic --mode random --probability %.11f -j XLB-SEP-%d\n", 1/float64(left), i)
		} else {
			fmt.Fprintf(&b, "-A XLB-SVC -j XLB-SEP-%d\n", i)
		}
	}
	for i, be := range backends {
		fmt.Fprintf(&b, "-A XLB-SEP-%d -j MARK --set-xmark %s\n", i, natMark)
		fmt.Fprintf(&b, "-A XLB-SEP-%d -p tcp -m tcp -j DNAT --to-destination %s\n", i, be)
	}
	fmt.Fprintf(&b, "-A XLB-POSTROUTING -m mark ! --mark %s -j RETURN\n", natMark)
	b.WriteString("-A XLB-POSTROUTING -j MARK --xor-mark 0x4000\n")
	b.WriteString("-A XLB-POSTROUTING -j MASQUERADE --random-fully\nCOMMIT\n")
	return b.String()
}
