package testnet

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"golang.org/x/sys/unix"
)

// A packet with a spoofed source sent on a raw socket arrives as built,
// and a capture on the receiving interface sees it.
func TestRawIPv4AndCapture(t *testing.T) {
	p := newPair(t)
	capt, err := p.b.Capture("eth0")
	if err != nil {
		t.Fatal(err)
	}
	defer capt.Close()
	raw, err := p.a.RawIPv4()
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	spoofed := netip.MustParseAddr("192.0.2.99")
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: spoofed.AsSlice(), DstIP: p.b.IP().AsSlice()}
	tcp := &layers.TCP{SrcPort: 40001, DstPort: 8080, Seq: 0x12345678, RST: true, Window: 0}
	tcp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ip, tcp); err != nil {
		t.Fatal(err)
	}
	if err := raw.Send(buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	frame := make([]byte, 2048)
	deadline := time.Now().Add(waitLong)
	for time.Now().Before(deadline) {
		n, err := capt.Read(frame, time.Second)
		if errors.Is(err, unix.EAGAIN) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		pkt := gopacket.NewPacket(frame[:n], layers.LayerTypeEthernet, gopacket.Default)
		got, ok := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if !ok {
			continue // ARP, for one
		}
		src := pkt.NetworkLayer().(*layers.IPv4).SrcIP
		if !src.Equal(net.IP(spoofed.AsSlice())) || !got.RST || got.Seq != 0x12345678 || got.DstPort != 8080 {
			t.Fatalf("captured %v", pkt)
		}
		return
	}
	t.Fatal("the spoofed reset never showed up in the capture")
}
