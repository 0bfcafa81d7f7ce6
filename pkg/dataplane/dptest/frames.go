package dptest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// TCP flag bits as in the header's flag byte.
const (
	FIN = 0x01
	SYN = 0x02
	RST = 0x04
	PSH = 0x08
	ACK = 0x10
)

// Proto is what Segment.Frame builds around a segment's addresses and ports.
type Proto uint8

// Protocols Frame can build. Only TCP carries the TCP fields.
const (
	TCP  Proto = iota // Ethernet/IP/TCP (the default); IPv6 when Src is an IPv6 address
	UDP               // Ethernet/IPv4/UDP with the segment's ports and payload
	ICMP              // Ethernet/IPv4/ICMP echo request (id 1, sequence 1); ports unused
	ARP               // broadcast ARP request from SrcMAC and Src's address for Dst's address
)

// Segment describes one Ethernet/IPv4/TCP frame (or, by Proto, one of the
// other frames XLB must leave alone).
type Segment struct {
	SrcMAC, DstMAC net.HardwareAddr
	Src, Dst       netip.AddrPort
	TTL            uint8 // default 64 when building
	ID             uint16
	Seq, Ack       uint32
	Flags          uint8 // FIN|SYN|RST|PSH|ACK
	Window         uint16
	Options        []layers.TCPOption
	Payload        []byte
	Proto          Proto
	// IPOptions grow the IPv4 header past 20 bytes.
	IPOptions []layers.IPv4Option
	// MoreFragments and FragOffset (in 8-byte units) make the frame an IPv4
	// fragment; either clears don't-fragment, which is set otherwise.
	MoreFragments bool
	FragOffset    uint16
	// UDPChecksumOff sends a UDP datagram with checksum 0 ("none", which
	// IPv4 allows).
	UDPChecksumOff bool
}

// Frame serialises the segment with correct lengths and checksums (gopacket).
func (s Segment) Frame() []byte {
	if s.Proto == ARP {
		return serialize(&layers.Ethernet{SrcMAC: s.SrcMAC, DstMAC: layers.EthernetBroadcast, EthernetType: layers.EthernetTypeARP},
			&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
				Operation: layers.ARPRequest, SourceHwAddress: s.SrcMAC, SourceProtAddress: s.Src.Addr().AsSlice(),
				DstHwAddress: make([]byte, 6), DstProtAddress: s.Dst.Addr().AsSlice()})
	}
	ttl := s.TTL
	if ttl == 0 {
		ttl = 64
	}
	eth := &layers.Ethernet{SrcMAC: s.SrcMAC, DstMAC: s.DstMAC, EthernetType: layers.EthernetTypeIPv4}
	var ip interface {
		gopacket.NetworkLayer
		gopacket.SerializableLayer
	}
	if s.Src.Addr().Is6() {
		eth.EthernetType = layers.EthernetTypeIPv6
		ip = &layers.IPv6{Version: 6, HopLimit: ttl, NextHeader: layers.IPProtocolTCP, SrcIP: s.Src.Addr().AsSlice(), DstIP: s.Dst.Addr().AsSlice()}
	} else {
		ip = s.ipv4(ttl)
	}
	var l4 gopacket.SerializableLayer
	switch s.Proto {
	case UDP:
		udp := &layers.UDP{SrcPort: layers.UDPPort(s.Src.Port()), DstPort: layers.UDPPort(s.Dst.Port())}
		check(udp.SetNetworkLayerForChecksum(ip))
		l4 = udp
	case ICMP:
		l4 = &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0), Id: 1, Seq: 1}
	default:
		tcp := &layers.TCP{SrcPort: layers.TCPPort(s.Src.Port()), DstPort: layers.TCPPort(s.Dst.Port()), Seq: s.Seq, Ack: s.Ack,
			FIN: s.Flags&FIN != 0, SYN: s.Flags&SYN != 0, RST: s.Flags&RST != 0, PSH: s.Flags&PSH != 0, ACK: s.Flags&ACK != 0,
			Window: s.Window, Options: s.Options}
		check(tcp.SetNetworkLayerForChecksum(ip))
		l4 = tcp
	}
	f := serialize(eth, ip, l4, gopacket.Payload(s.Payload))
	if s.Proto == UDP && s.UDPChecksumOff {
		l4off := 14 + int(f[14]&0x0f)*4
		f[l4off+6], f[l4off+7] = 0, 0
	}
	return f
}

// ipv4 is the segment's IPv4 header: don't-fragment unless it is a fragment.
func (s Segment) ipv4(ttl uint8) *layers.IPv4 {
	proto := map[Proto]layers.IPProtocol{TCP: layers.IPProtocolTCP, UDP: layers.IPProtocolUDP, ICMP: layers.IPProtocolICMPv4}[s.Proto]
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: ttl, Id: s.ID, Flags: layers.IPv4DontFragment, Protocol: proto,
		SrcIP: s.Src.Addr().AsSlice(), DstIP: s.Dst.Addr().AsSlice(), Options: s.IPOptions, FragOffset: s.FragOffset}
	switch {
	case s.MoreFragments:
		ip.Flags = layers.IPv4MoreFragments
	case s.FragOffset != 0:
		ip.Flags = 0
	}
	return ip
}

// serialize builds a frame from layers with lengths and checksums computed.
func serialize(ls ...gopacket.SerializableLayer) []byte {
	buf := gopacket.NewSerializeBuffer()
	check(gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...))
	return append([]byte(nil), buf.Bytes()...)
}

// check panics on a frame the fixture itself describes wrongly.
func check(err error) {
	if err != nil {
		panic(err)
	}
}

// Unpadded cuts a frame to its Ethernet header plus the IPv4 total length,
// dropping the zero padding gopacket adds up to the 60-byte Ethernet minimum.
func Unpadded(frame []byte) []byte {
	if len(frame) < 14+20 {
		return frame
	}
	n := 14 + int(binary.BigEndian.Uint16(frame[16:18]))
	if n < len(frame) {
		return frame[:n]
	}
	return frame
}

// Decoded is a frame taken apart by gopacket.
type Decoded struct {
	Eth *layers.Ethernet
	IP  *layers.IPv4
	TCP *layers.TCP
}

// Decode parses an Ethernet/IPv4/TCP frame.
func Decode(frame []byte) (Decoded, error) {
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	var d Decoded
	var ok bool
	if d.Eth, ok = p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet); !ok {
		return d, fmt.Errorf("no Ethernet layer")
	}
	if d.IP, ok = p.Layer(layers.LayerTypeIPv4).(*layers.IPv4); !ok {
		return d, fmt.Errorf("no IPv4 layer")
	}
	if d.TCP, ok = p.Layer(layers.LayerTypeTCP).(*layers.TCP); !ok {
		return d, fmt.Errorf("no TCP layer")
	}
	return d, nil
}

// Flags returns the TCP flag byte of a decoded segment.
func (d Decoded) Flags() uint8 {
	var f uint8
	for bit, on := range map[uint8]bool{FIN: d.TCP.FIN, SYN: d.TCP.SYN, RST: d.TCP.RST, PSH: d.TCP.PSH, ACK: d.TCP.ACK} {
		if on {
			f |= bit
		}
	}
	return f
}

// Src returns the IPv4 source address and TCP source port.
func (d Decoded) Src() netip.AddrPort {
	a, _ := netip.AddrFromSlice(d.IP.SrcIP.To4())
	return netip.AddrPortFrom(a, uint16(d.TCP.SrcPort))
}

// Dst returns the IPv4 destination address and TCP destination port.
func (d Decoded) Dst() netip.AddrPort {
	a, _ := netip.AddrFromSlice(d.IP.DstIP.To4())
	return netip.AddrPortFrom(a, uint16(d.TCP.DstPort))
}

// onesSum is the RFC 1071 one's complement sum of b (odd length padded).
func onesSum(sum uint32, b []byte) uint32 {
	for len(b) >= 2 {
		sum += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	return sum
}

func fold(sum uint32) uint16 {
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return uint16(sum)
}

// VerifyChecksums checks the IPv4 header and TCP (or UDP: a zero one means
// none) checksums of a frame
// independently of gopacket and of the data path: the one's complement sum
// over each checksummed range, checksum field included, must be 0xffff.
func VerifyChecksums(frame []byte) error {
	if len(frame) < 14+20 {
		return fmt.Errorf("frame of %d bytes is too short", len(frame))
	}
	ip := frame[14:]
	ihl := int(ip[0]&0x0f) * 4
	tot := int(binary.BigEndian.Uint16(ip[2:4]))
	if ihl < 20 || tot < ihl || tot > len(ip) {
		return fmt.Errorf("bad IPv4 lengths ihl=%d tot=%d frame=%d", ihl, tot, len(frame))
	}
	if s := fold(onesSum(0, ip[:ihl])); s != 0xffff {
		return fmt.Errorf("IPv4 header checksum %#04x does not verify (sum %#04x)", binary.BigEndian.Uint16(ip[10:12]), s)
	}
	seg := ip[ihl:tot]
	if ip[9] == 17 && len(seg) >= 8 && seg[6] == 0 && seg[7] == 0 {
		return nil // a UDP datagram without a checksum
	}
	pseudo := make([]byte, 0, 12)
	pseudo = append(pseudo, ip[12:20]...)
	pseudo = append(pseudo, 0, ip[9], byte(len(seg)>>8), byte(len(seg)))
	if s := fold(onesSum(onesSum(0, pseudo), seg)); s != 0xffff {
		return fmt.Errorf("TCP checksum %#04x does not verify (sum %#04x)", binary.BigEndian.Uint16(seg[16:18]), s)
	}
	return nil
}

// Diff compares two frames field by field and describes the first
// differences; empty when the frames are byte-identical.
func Diff(got, want []byte) string {
	if bytes.Equal(got, want) {
		return ""
	}
	g, gerr := Decode(got)
	w, werr := Decode(want)
	if gerr != nil || werr != nil {
		return fmt.Sprintf("frames differ and do not both decode (got err %v, want err %v)\n got % x\nwant % x", gerr, werr, got, want)
	}
	var out bytes.Buffer
	cmp := func(field string, a, b any) {
		if fmt.Sprint(a) != fmt.Sprint(b) {
			fmt.Fprintf(&out, "%s: got %v, want %v\n", field, a, b)
		}
	}
	cmp("eth.src", g.Eth.SrcMAC, w.Eth.SrcMAC)
	cmp("eth.dst", g.Eth.DstMAC, w.Eth.DstMAC)
	cmp("ip.src", g.IP.SrcIP, w.IP.SrcIP)
	cmp("ip.dst", g.IP.DstIP, w.IP.DstIP)
	cmp("ip.ttl", g.IP.TTL, w.IP.TTL)
	cmp("ip.len", g.IP.Length, w.IP.Length)
	cmp("ip.id", g.IP.Id, w.IP.Id)
	cmp("ip.flags", g.IP.Flags, w.IP.Flags)
	cmp("ip.tos", g.IP.TOS, w.IP.TOS)
	cmp("ip.checksum", g.IP.Checksum, w.IP.Checksum)
	cmp("tcp.sport", g.TCP.SrcPort, w.TCP.SrcPort)
	cmp("tcp.dport", g.TCP.DstPort, w.TCP.DstPort)
	cmp("tcp.seq", g.TCP.Seq, w.TCP.Seq)
	cmp("tcp.ack", g.TCP.Ack, w.TCP.Ack)
	cmp("tcp.flags", fmt.Sprintf("%#02x", g.Flags()), fmt.Sprintf("%#02x", w.Flags()))
	cmp("tcp.window", g.TCP.Window, w.TCP.Window)
	cmp("tcp.checksum", g.TCP.Checksum, w.TCP.Checksum)
	cmp("tcp.dataoffset", g.TCP.DataOffset, w.TCP.DataOffset)
	cmp("tcp.payload", len(g.TCP.Payload), len(w.TCP.Payload))
	cmp("frame.len", len(got), len(want))
	if out.Len() == 0 {
		fmt.Fprintf(&out, "frames differ in bytes not covered by the field list\n got % x\nwant % x", got, want)
	}
	return out.String()
}

// Unpadded serialises the segment without Ethernet minimum-size padding.
func (s Segment) Unpadded() []byte { return Unpadded(s.Frame()) }
