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

// A capture with a socket filter keeps only the frames the filter
// accepts: here IPv4 TCP, so neither a UDP packet sent first nor ARP
// shows up, and the TCP segment does.
func TestCaptureFilter(t *testing.T) {
	p := newPair(t)
	capt, err := p.b.Capture("eth0")
	if err != nil {
		t.Fatal(err)
	}
	defer capt.Close()
	if err := capt.Filter([]unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_H | unix.BPF_ABS, K: 12},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: 0x0800, Jf: 3},
		{Code: unix.BPF_LD | unix.BPF_B | unix.BPF_ABS, K: 14 + 9},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: 6, Jf: 1},
		{Code: unix.BPF_RET | unix.BPF_K, K: 1 << 16},
		{Code: unix.BPF_RET | unix.BPF_K, K: 0},
	}); err != nil {
		t.Fatal(err)
	}
	raw, err := p.a.RawIPv4()
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	ip := &layers.IPv4{Version: 4, TTL: 64, SrcIP: p.a.IP().AsSlice(), DstIP: p.b.IP().AsSlice()}
	for _, l := range []gopacket.SerializableLayer{
		&layers.UDP{SrcPort: 40001, DstPort: 9},
		&layers.TCP{SrcPort: 40001, DstPort: 8080, Seq: 0x12345678, RST: true},
	} {
		ip.Protocol = layers.IPProtocolUDP
		if tcp, ok := l.(*layers.TCP); ok {
			ip.Protocol = layers.IPProtocolTCP
			tcp.SetNetworkLayerForChecksum(ip)
		} else {
			l.(*layers.UDP).SetNetworkLayerForChecksum(ip)
		}
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ip, l); err != nil {
			t.Fatal(err)
		}
		if err := raw.Send(buf.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	frame := make([]byte, 2048)
	n, err := capt.Read(frame, waitLong)
	if err != nil {
		t.Fatal(err)
	}
	pkt := gopacket.NewPacket(frame[:n], layers.LayerTypeEthernet, gopacket.Default)
	if got, ok := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP); !ok || !got.RST || got.Seq != 0x12345678 {
		t.Fatalf("the first frame captured is %v, want the TCP reset", pkt)
	}
}
