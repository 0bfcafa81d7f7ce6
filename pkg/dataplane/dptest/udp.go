package dptest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/xlbproject/xlb/pkg/dataplane"
)

// UDPFromClient builds a datagram from client to listen:localPort as it
// arrives on Front.
func (e *Env) UDPFromClient(client netip.AddrPort, localPort uint16, payload []byte) Segment {
	return Segment{Proto: UDP, SrcMAC: MAC(client.Addr()), DstMAC: e.Front.MAC, Src: client,
		Dst: netip.AddrPortFrom(ListenIP, localPort), Payload: payload, ID: 7}
}

// UDPFromBackend builds a datagram from backend to SNAT:snatPort as it
// arrives on BackendIface.
func (e *Env) UDPFromBackend(backend netip.AddrPort, snatPort uint16, payload []byte) Segment {
	return Segment{Proto: UDP, SrcMAC: MAC(backend.Addr()), DstMAC: e.BackendIface().MAC, Src: backend,
		Dst: netip.AddrPortFrom(e.SNAT, snatPort), Payload: payload, ID: 9}
}

// UDPForwardKey is the forward flow key of the UDP pair client ->
// listen:localPort.
func UDPForwardKey(client netip.AddrPort, localPort uint16) dataplane.FlowKey {
	return dataplane.NewUDPFlowKey(client, netip.AddrPortFrom(ListenIP, localPort), dataplane.DirClient)
}

// LookupUDPPair is LookupPair for a UDP pair.
func (e *Env) LookupUDPPair(client netip.AddrPort, localPort uint16) (Pair, bool, error) {
	p := Pair{FwdKey: UDPForwardKey(client, localPort)}
	v, err := e.DP.LookupFlow(p.FwdKey)
	if err == dataplane.ErrNotFound {
		return p, false, nil
	}
	if err != nil {
		return p, false, err
	}
	p.Fwd, p.RevKey = v, v.Peer(p.FwdKey)
	r, err := e.DP.LookupFlow(p.RevKey)
	if err != nil && err != dataplane.ErrNotFound {
		return p, false, err
	}
	p.Rev = r
	return p, true, nil
}

// DecodedUDP is a parsed Ethernet/IPv4/UDP frame.
type DecodedUDP struct {
	Eth *layers.Ethernet
	IP  *layers.IPv4
	UDP *layers.UDP
}

// DecodeUDP parses an Ethernet/IPv4/UDP frame.
func DecodeUDP(frame []byte) (DecodedUDP, error) {
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	var d DecodedUDP
	var ok bool
	if d.Eth, ok = p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet); !ok {
		return d, fmt.Errorf("no Ethernet layer")
	}
	if d.IP, ok = p.Layer(layers.LayerTypeIPv4).(*layers.IPv4); !ok {
		return d, fmt.Errorf("no IPv4 layer")
	}
	if d.UDP, ok = p.Layer(layers.LayerTypeUDP).(*layers.UDP); !ok {
		return d, fmt.Errorf("no UDP layer")
	}
	return d, nil
}

// Src returns the IPv4 source address and UDP source port.
func (d DecodedUDP) Src() netip.AddrPort {
	a, _ := netip.AddrFromSlice(d.IP.SrcIP.To4())
	return netip.AddrPortFrom(a, uint16(d.UDP.SrcPort))
}

// Dst returns the IPv4 destination address and UDP destination port.
func (d DecodedUDP) Dst() netip.AddrPort {
	a, _ := netip.AddrFromSlice(d.IP.DstIP.To4())
	return netip.AddrPortFrom(a, uint16(d.UDP.DstPort))
}

// ZeroSumPayload is payload (even length) with two bytes appended so that
// the UDP checksum of the IPv4 datagram src -> dst carrying it computes to
// 0, which a sender transmits as 0xffff (RFC 768): the fixture of a
// rewrite whose checksum must not become 0.
func ZeroSumPayload(src, dst netip.AddrPort, payload []byte) []byte {
	p := append(bytes.Clone(payload), 0, 0)
	n := 8 + len(p)
	sum := onesSum(0, src.Addr().AsSlice())
	sum = onesSum(sum, dst.Addr().AsSlice())
	sum += 17 + uint32(n)
	hdr := make([]byte, 8)
	binary.BigEndian.PutUint16(hdr[0:], src.Port())
	binary.BigEndian.PutUint16(hdr[2:], dst.Port())
	binary.BigEndian.PutUint16(hdr[4:], uint16(n))
	sum = onesSum(sum, hdr)
	sum = onesSum(sum, p)
	binary.BigEndian.PutUint16(p[len(p)-2:], 0xffff-fold(sum))
	return p
}
