package floor_test

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/google/gopacket/layers"

	"github.com/xlbproject/xlb/internal/testnet"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// TestBalancerPassesOthers: every frame that is not the client's to
// VIP:port, nor a reply from the backend its client port is balanced to,
// addressed to the interface's MAC, as an unfragmented IPv4 TCP segment
// the frame holds whole, is XDP_PASS and left byte for byte as it was.
func TestBalancerPassesOthers(t *testing.T) {
	for _, snat := range []netip.Addr{dt.ListenIP, testnet.XLBExtraIP(0)} {
		t.Run("snat="+snat.String(), func(t *testing.T) {
			f := newLB(t, snat)
			const cport = 40000
			picked, _ := f.backendOf(cport)
			other := f.cfg.Backends[(f.cfg.BackendIndex(cport)+1)%len(f.cfg.Backends)]
			data := []byte("payload")
			cli := func(mod func(*dt.Segment)) []byte {
				s := f.fromClient(cport, dt.ACK|dt.PSH, 1, 1, data)
				mod(&s)
				return s.Frame()
			}
			back := func(mod func(*dt.Segment)) []byte {
				s := f.fromBackend(cport, dt.ACK|dt.PSH, 1, 1, data)
				mod(&s)
				return s.Frame()
			}
			whole := cli(func(*dt.Segment) {})
			cases := []struct {
				name  string
				frame []byte
			}{
				{"client to another port", cli(func(s *dt.Segment) { s.Dst = netip.AddrPortFrom(f.cfg.VIP, 81) })},
				{"another client", cli(func(s *dt.Segment) { s.Src = netip.AddrPortFrom(dt.Client2IP, cport) })},
				{"client to another address", cli(func(s *dt.Segment) { s.Dst = netip.AddrPortFrom(dt.Client2IP, 80) })},
				{"client frame for another MAC", cli(func(s *dt.Segment) { s.DstMAC = picked.MAC })},
				{"client frame broadcast", cli(func(s *dt.Segment) { s.DstMAC = layers.EthernetBroadcast })},
				{"UDP to VIP:port", cli(func(s *dt.Segment) { s.Proto = dt.UDP })},
				{"ICMP echo to VIP", cli(func(s *dt.Segment) { s.Proto = dt.ICMP })},
				{"ARP request", cli(func(s *dt.Segment) { s.Proto = dt.ARP })},
				{"IPv6 TCP to port", cli(func(s *dt.Segment) {
					s.Src = netip.MustParseAddrPort("[2001:db8::1]:40000")
					s.Dst = netip.MustParseAddrPort("[2001:db8::10]:80")
				})},
				{"first fragment", cli(func(s *dt.Segment) { s.MoreFragments = true })},
				{"later fragment", cli(func(s *dt.Segment) { s.FragOffset = 100 })},
				{"IPv4 options", cli(func(s *dt.Segment) {
					s.IPOptions = []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 0}}
				})},
				{"truncated datagram", whole[:len(whole)-3]},
				{"reply from the backend not picked", back(func(s *dt.Segment) {
					s.Src, s.SrcMAC = netip.AddrPortFrom(other.IP, other.Port), other.MAC
				})},
				{"reply from the picked backend's other port", back(func(s *dt.Segment) {
					s.Src = netip.AddrPortFrom(picked.IP, picked.Port+100)
				})},
				{"reply to another address", back(func(s *dt.Segment) { s.Dst = netip.AddrPortFrom(dt.Client2IP, cport) })},
				{"reply frame for another MAC", back(func(s *dt.Segment) { s.DstMAC = f.cfg.ClientMAC })},
				{"client to the SNAT address", cli(func(s *dt.Segment) { s.Dst = netip.AddrPortFrom(f.cfg.SNAT, cport) })},
				{"backend as a client of VIP:port", back(func(s *dt.Segment) {
					s.Src, s.Dst = netip.AddrPortFrom(picked.IP, 50000), netip.AddrPortFrom(f.cfg.VIP, f.cfg.Port)
				})},
			}
			for _, c := range cases {
				act, out := runLB(t, f.bal.Program(), c.frame)
				if act != dt.XDPPass {
					t.Errorf("%s: %s, want XDP_PASS", c.name, dt.ActionName(act))
				}
				if !bytes.Equal(out, c.frame) {
					t.Errorf("%s: the frame was changed\n got % x\nwant % x", c.name, out, c.frame)
				}
			}
		})
	}
}

// TestBalancerTTL: a frame it would balance with TTL 1 or 0 is dropped in
// either direction, as XLB drops it; TTL 2 leaves with TTL 1.
func TestBalancerTTL(t *testing.T) {
	f := newLB(t, dt.ListenIP)
	for _, ttl := range []uint8{0, 1} {
		for name, s := range map[string]dt.Segment{
			"client": f.fromClient(40001, dt.ACK, 1, 1, nil), "backend": f.fromBackend(40001, dt.ACK, 1, 1, nil),
		} {
			if act, _ := runLB(t, f.bal.Program(), frameTTL(s, ttl)); act != dt.XDPDrop {
				t.Errorf("%s TTL %d: %s, want XDP_DROP", name, ttl, dt.ActionName(act))
			}
		}
	}
	c := f.fromClient(40001, dt.ACK, 1, 1, nil)
	c.TTL = 2
	f.expectTX(t, "client TTL 2", c, f.toBackend(c))
	b := f.fromBackend(40001, dt.ACK, 1, 1, nil)
	b.TTL = 2
	f.expectTX(t, "backend TTL 2", b, f.toClient(b))
}

// frameTTL builds s with IPv4 TTL ttl, 0 included (Segment builds 0 as
// 64), with a correct header checksum.
func frameTTL(s dt.Segment, ttl uint8) []byte {
	if ttl != 0 {
		s.TTL = ttl
		return s.Frame()
	}
	s.TTL = 1
	fr := s.Frame()
	// TTL 1 -> 0 lowers the header word at offset 8 by 0x0100, so the
	// checksum (its one's complement) rises by 0x0100.
	fr[14+8] = 0
	c := uint32(binary.BigEndian.Uint16(fr[14+10:])) + 0x0100
	binary.BigEndian.PutUint16(fr[14+10:], uint16(c&0xffff+c>>16))
	if err := dt.VerifyChecksums(fr); err != nil {
		panic(err)
	}
	return fr
}
