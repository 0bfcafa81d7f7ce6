package testnet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// NFTBalancer makes h balance proto ("tcp" or "udp") to vip over backends
// with the kernel's NAT through nftables, the way kube-proxy's nftables
// mode does: the service chain picks an endpoint chain with `numgen random
// mod N vmap`, the endpoint chain marks the packet (0x4000) and DNATs it,
// and postrouting masquerades marked packets with random source ports
// (`masquerade fully-random`). vip must be an address of h, which
// forwards and sends no ICMP redirects (one-arm, as NATBalancer). The
// rules live in table ip xlb-nat of h's namespace and go with it; a host
// balances several services, one call each, every (proto, vip port)
// once. Needs
// nft (Debian package nftables; kernel NFT_NUMGEN and NFT_NAT).
func (h *Host) NFTBalancer(vip netip.AddrPort, backends []netip.AddrPort, proto string) error {
	if len(backends) == 0 {
		return errors.New("testnet: NFTBalancer without backends")
	}
	if proto != "tcp" && proto != "udp" {
		return fmt.Errorf("testnet: NFTBalancer: proto %q, want tcp or udp", proto)
	}
	if err := h.natForwarding(); err != nil {
		return err
	}
	// The table and the chains every service shares exist after the
	// host's first service.
	first := h.Command(context.Background(), "nft", "list", "table", "ip", "xlb-nat").Run() != nil
	cmd := h.Command(context.Background(), "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(nftRules(vip, backends, proto, first))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("testnet: nft -f (Debian package nftables) in %s: %w\n%s", h.NS, err, out)
	}
	return nil
}

// nftRules is the `nft -f` input of NFTBalancer: kube-proxy's nftables
// layout (its chains services, service-*, endpoint-*, masquerading). With
// first, the table, its base chains and the chains every service shares;
// then the service's chains (service-<proto>-<port>,
// endpoint-<proto>-<port>-<i>) and its rule in services.
func nftRules(vip netip.AddrPort, backends []netip.AddrPort, proto string, first bool) string {
	var b strings.Builder
	if first {
		b.WriteString("table ip xlb-nat {\n")
		b.WriteString("\tchain services {\n\t}\n")
		b.WriteString("\tchain masquerading {\n\t\tmeta mark & 0x4000 == 0 return\n\t\tmeta mark set meta mark xor 0x4000\n\t\tmasquerade fully-random\n\t}\n")
		b.WriteString("\tchain prerouting {\n\t\ttype nat hook prerouting priority -100; policy accept;\n\t\tjump services\n\t}\n")
		b.WriteString("\tchain output {\n\t\ttype nat hook output priority -100; policy accept;\n\t\tjump services\n\t}\n")
		b.WriteString("\tchain postrouting {\n\t\ttype nat hook postrouting priority 100; policy accept;\n\t\tjump masquerading\n\t}\n")
		b.WriteString("}\n")
	}
	svc := fmt.Sprintf("service-%s-%d", proto, vip.Port())
	var vmap []string
	for i, be := range backends {
		ep := fmt.Sprintf("endpoint-%s-%d-%d", proto, vip.Port(), i)
		fmt.Fprintf(&b, "add chain ip xlb-nat %s\n", ep)
		fmt.Fprintf(&b, "add rule ip xlb-nat %s meta mark set meta mark or 0x4000\n", ep)
		fmt.Fprintf(&b, "add rule ip xlb-nat %s meta l4proto %s dnat ip to %s\n", ep, proto, be)
		vmap = append(vmap, fmt.Sprintf("%d : goto %s", i, ep))
	}
	fmt.Fprintf(&b, "add chain ip xlb-nat %s\n", svc)
	fmt.Fprintf(&b, "add rule ip xlb-nat %s numgen random mod %d vmap { %s }\n", svc, len(backends), strings.Join(vmap, ", "))
	fmt.Fprintf(&b, "add rule ip xlb-nat services ip daddr %s %s dport %d goto %s\n", vip.Addr(), proto, vip.Port(), svc)
	return b.String()
}
