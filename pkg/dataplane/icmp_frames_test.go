package dataplane_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// ICMP frames for the ICMP fixtures (icmp_fixtures_test.go), built and
// taken apart with gopacket only: the data path's checksum code is never
// the judge of its own output.

// ICMPv4 types and codes the fixtures send (RFC 792, RFC 1191).
const (
	icmpEchoReply      = 0
	icmpUnreachable    = 3
	icmpRedirect       = 5
	icmpTimeExceeded   = 11
	icmpParamProblem   = 12
	codeHostUnreach    = 1
	codePortUnreach    = 3
	codeFragNeeded     = 4
	codeAdminForbidden = 13
	codeTTLInTransit   = 0
)

// icmpMsg is an Ethernet frame carrying an ICMPv4 message: an error about
// a quoted datagram, or any other type with Quote as its data.
type icmpMsg struct {
	SrcMAC, DstMAC net.HardwareAddr
	Src, Dst       netip.Addr
	TTL            uint8
	Type, Code     uint8
	Rest           uint32 // the four bytes after the checksum: 0, a next-hop MTU, a gateway...
	Quote          []byte // the quoted datagram from its IPv4 header on, as many bytes as its sender quoted
}

// frame serialises the message (gopacket: lengths and every checksum
// computed). The outer IPv4 header is what Linux sends an ICMP error with:
// TOS 0xc0, no fragment flags, ID 4242.
func (m icmpMsg) frame() []byte {
	buf := gopacket.NewSerializeBuffer()
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		&layers.Ethernet{SrcMAC: m.SrcMAC, DstMAC: m.DstMAC, EthernetType: layers.EthernetTypeIPv4},
		&layers.IPv4{Version: 4, IHL: 5, TOS: 0xc0, Id: 4242, TTL: m.TTL, Protocol: layers.IPProtocolICMPv4,
			SrcIP: m.Src.AsSlice(), DstIP: m.Dst.AsSlice()},
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(m.Type, m.Code), Id: uint16(m.Rest >> 16), Seq: uint16(m.Rest)},
		gopacket.Payload(m.Quote))
	if err != nil {
		panic(err)
	}
	return bytes.Clone(buf.Bytes())
}

// datagram is the IPv4 datagram of s as gopacket builds it (its frame
// without the Ethernet header and padding).
func datagram(s dt.Segment) []byte { return dt.Unpadded(s.Frame())[14:] }

// quoted is the first n bytes of a datagram (all of it when n is 0 or
// beyond its end): what an ICMP error carries of it.
func quoted(d []byte, n int) []byte {
	if n <= 0 || n > len(d) {
		n = len(d)
	}
	return bytes.Clone(d[:n])
}

// decodedICMP is an ICMP frame taken apart by gopacket.
type decodedICMP struct {
	eth   *layers.Ethernet
	ip    *layers.IPv4
	icmp  *layers.ICMPv4
	inner *layers.IPv4 // the quoted IPv4 header (nil when the quote holds none)
	tcp   []byte       // the quoted bytes after the inner IPv4 header
}

// decodeICMP takes an Ethernet/IPv4/ICMPv4 frame apart with gopacket.
func decodeICMP(frame []byte) (decodedICMP, error) {
	d := decodedICMP{eth: &layers.Ethernet{}, ip: &layers.IPv4{}, icmp: &layers.ICMPv4{}}
	var rest gopacket.Payload
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, d.eth, d.ip, d.icmp, &rest)
	var got []gopacket.LayerType
	if err := parser.DecodeLayers(frame, &got); err != nil && len(got) < 3 {
		return d, fmt.Errorf("decoded %v: %w", got, err)
	}
	if len(got) < 3 || got[2] != layers.LayerTypeICMPv4 {
		return d, fmt.Errorf("layers %v, want Ethernet, IPv4, ICMPv4", got)
	}
	inner := &layers.IPv4{}
	if err := inner.DecodeFromBytes(d.icmp.Payload, gopacket.NilDecodeFeedback); err == nil {
		d.inner = inner
		d.tcp = inner.Payload
	}
	return d, nil
}

// ipv4ChecksumOK recomputes an IPv4 header checksum with gopacket.
func ipv4ChecksumOK(ip *layers.IPv4) error {
	c := *ip
	if err := c.SerializeTo(gopacket.NewSerializeBuffer(), gopacket.SerializeOptions{ComputeChecksums: true}); err != nil {
		return err
	}
	if c.Checksum != ip.Checksum {
		return fmt.Errorf("checksum %#04x, gopacket computes %#04x", ip.Checksum, c.Checksum)
	}
	return nil
}

// verifyICMPChecksums checks every checksum of an ICMP error frame by
// recomputing it with gopacket: the outer IPv4 header, the ICMP message,
// the quoted IPv4 header and, when the quote reaches it, the quoted TCP
// checksum over the quoted pseudo header and segment. A quote that cuts the
// segment short is judged against whole, the complete datagram it is cut
// from (nil: unknown, the TCP checksum is not checked). It returns which
// checksums it checked.
func verifyICMPChecksums(frame, whole []byte) ([]string, error) {
	d, err := decodeICMP(frame)
	if err != nil {
		return nil, err
	}
	var checked []string
	if err := ipv4ChecksumOK(d.ip); err != nil {
		return checked, fmt.Errorf("outer IPv4: %w", err)
	}
	checked = append(checked, "outer IPv4")

	c := *d.icmp
	if err := gopacket.SerializeLayers(gopacket.NewSerializeBuffer(), gopacket.SerializeOptions{ComputeChecksums: true},
		&c, gopacket.Payload(d.icmp.Payload)); err != nil {
		return checked, err
	}
	if c.Checksum != d.icmp.Checksum {
		return checked, fmt.Errorf("ICMP: checksum %#04x, gopacket computes %#04x", d.icmp.Checksum, c.Checksum)
	}
	checked = append(checked, "ICMP")

	if d.inner == nil {
		return checked, errors.New("the quote holds no IPv4 header")
	}
	if err := ipv4ChecksumOK(d.inner); err != nil {
		return checked, fmt.Errorf("quoted IPv4: %w", err)
	}
	checked = append(checked, "quoted IPv4")

	if d.inner.Protocol != layers.IPProtocolTCP || len(d.tcp) < 18 {
		return checked, nil // no TCP checksum quoted
	}
	full := d.icmp.Payload
	if int(d.inner.Length) != len(full) {
		if whole == nil || !bytes.Equal(whole[:len(full)], full) {
			return checked, nil // cut short, and the rest is unknown
		}
		full = whole
	}
	want, err := tcpChecksum(full)
	if err != nil {
		return checked, fmt.Errorf("quoted TCP: %w", err)
	}
	if got := binary.BigEndian.Uint16(d.tcp[16:18]); got != want {
		return checked, fmt.Errorf("quoted TCP: checksum %#04x, gopacket computes %#04x over the whole segment", got, want)
	}
	return append(checked, "quoted TCP"), nil
}

// tcpChecksum is the TCP checksum gopacket computes for the IPv4/TCP
// datagram dg, whatever its checksum field holds.
func tcpChecksum(dg []byte) (uint16, error) {
	ip := &layers.IPv4{}
	if err := ip.DecodeFromBytes(dg, gopacket.NilDecodeFeedback); err != nil {
		return 0, err
	}
	seg := bytes.Clone(ip.Payload)
	seg[16], seg[17] = 0, 0
	tcp := &layers.TCP{}
	if err := tcp.DecodeFromBytes(seg, gopacket.NilDecodeFeedback); err != nil {
		return 0, err
	}
	if err := tcp.SetNetworkLayerForChecksum(ip); err != nil {
		return 0, err
	}
	return tcp.ComputeChecksum()
}

// icmpDiff lists the fields (gopacket) in which two ICMP frames differ;
// the bytes of both when no listed field does.
func icmpDiff(got, want []byte) string {
	g, gerr := decodeICMP(got)
	w, werr := decodeICMP(want)
	if gerr != nil || werr != nil {
		return fmt.Sprintf("frames do not both decode as ICMP (got: %v, want: %v)\n got % x\nwant % x", gerr, werr, got, want)
	}
	type field struct {
		name      string
		got, want any
	}
	fields := []field{
		{"eth.src", g.eth.SrcMAC, w.eth.SrcMAC}, {"eth.dst", g.eth.DstMAC, w.eth.DstMAC},
		{"ip.src", g.ip.SrcIP, w.ip.SrcIP}, {"ip.dst", g.ip.DstIP, w.ip.DstIP},
		{"ip.ttl", g.ip.TTL, w.ip.TTL}, {"ip.tos", g.ip.TOS, w.ip.TOS},
		{"ip.len", g.ip.Length, w.ip.Length}, {"ip.checksum", g.ip.Checksum, w.ip.Checksum},
		{"icmp.typecode", g.icmp.TypeCode, w.icmp.TypeCode}, {"icmp.checksum", g.icmp.Checksum, w.icmp.Checksum},
		{"icmp.rest", []uint16{g.icmp.Id, g.icmp.Seq}, []uint16{w.icmp.Id, w.icmp.Seq}},
		{"quote.len", len(g.icmp.Payload), len(w.icmp.Payload)}, {"frame.len", len(got), len(want)},
	}
	if g.inner != nil && w.inner != nil {
		head := func(b []byte) string { return fmt.Sprintf("% x", b[:min(len(b), 20)]) }
		fields = append(fields,
			field{"quoted.ip.src", g.inner.SrcIP, w.inner.SrcIP}, field{"quoted.ip.dst", g.inner.DstIP, w.inner.DstIP},
			field{"quoted.ip.ttl", g.inner.TTL, w.inner.TTL}, field{"quoted.ip.checksum", g.inner.Checksum, w.inner.Checksum},
			field{"quoted.l4", head(g.tcp), head(w.tcp)})
	}
	var diffs []string
	for _, f := range fields {
		if a, b := fmt.Sprint(f.got), fmt.Sprint(f.want); a != b {
			diffs = append(diffs, fmt.Sprintf("%s: got %s, want %s", f.name, a, b))
		}
	}
	if len(diffs) == 0 {
		return fmt.Sprintf("frames differ in bytes no listed field covers\n got % x\nwant % x", got, want)
	}
	return strings.Join(diffs, "\n")
}

// The verifier itself: a frame gopacket built passes, and a flipped bit in
// any one of its four checksums is caught and named. No kernel needed.
func TestVerifyICMPChecksumsCatchesEachChecksum(t *testing.T) {
	seg := dt.Segment{SrcMAC: dt.MAC(dt.ClientIP), DstMAC: dt.MAC(dt.ListenIP), Src: cli, Dst: netip.AddrPortFrom(dt.ListenIP, 80),
		Flags: dt.ACK | dt.PSH, Seq: isnC + 1, Ack: isnB + 1, Window: 1000, Payload: payload}
	m := icmpMsg{SrcMAC: dt.MAC(frontRouter), DstMAC: dt.MAC(dt.ListenIP), Src: frontRouter, Dst: dt.ListenIP, TTL: 64,
		Type: icmpUnreachable, Code: codeFragNeeded, Rest: 1280, Quote: datagram(seg)}
	good := m.frame()
	if checked, err := verifyICMPChecksums(good, nil); err != nil || len(checked) != 4 {
		t.Fatalf("a gopacket frame: checked %v, err %v; want all four checksums good", checked, err)
	}
	// the outer checksums in the frame; the quoted ones in the quote, the
	// frame then rebuilt so that the ICMP checksum covers the damage
	const eth, ip = 14, 20
	damage := func(b []byte, off int) []byte { b = bytes.Clone(b); b[off] ^= 0x10; return b }
	quoteBad := func(off int) []byte { q := m; q.Quote = damage(m.Quote, off); return q.frame() }
	for _, c := range []struct {
		part  string
		frame []byte
	}{
		{"outer IPv4", damage(good, eth+10)},
		{"ICMP", damage(good, eth+ip+2)},
		{"quoted IPv4", quoteBad(10)},
		{"quoted TCP", quoteBad(ip + 16)},
	} {
		if _, err := verifyICMPChecksums(c.frame, nil); err == nil || !strings.HasPrefix(err.Error(), c.part) {
			t.Errorf("%s checksum damaged: err %v, want one naming %s", c.part, err, c.part)
		}
	}
}
