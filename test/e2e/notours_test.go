package e2e

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/xlbproject/xlb/internal/testnet"
)

// otherHostMAC is a MAC no lab host has (the lab's address of
// 192.0.2.11, another XLB host of a fleet): the lab's bridge has never
// learnt it, so it floods a frame for it to every port, XLB's included,
// as a switch does after MAC aging or for a dead host's address still in
// a router's neighbour table.
var otherHostMAC = testnet.EndpointMAC(netip.MustParseAddr("192.0.2.11"))

// The fleet's bug: XDP runs before the kernel drops a frame for another
// host's MAC, so XLB balanced (or, with no routable backend, reset)
// other hosts' client SYNs that a bridge flooded to it. From the client's
// namespace, SYNs to the VIP go out as whole frames addressed to another
// host's MAC and to the broadcast address: XLB neither answers nor
// balances them, and counts each (xlb_xdp_not_ours_total). The same SYN
// addressed to XLB's own MAC is answered (the frames are otherwise
// balanced ones).
func TestFrameForAnotherHost(t *testing.T) {
	l := greetedLab(t)
	p := startXLB(t, l, labConfig(l, ""))
	cl := l.Client()
	capt, err := cl.Capture("eth0")
	if err != nil {
		t.Fatal(err)
	}
	defer capt.Close()

	foreign := []struct {
		port uint16
		mac  net.HardwareAddr
	}{{47001, otherHostMAC}, {47002, otherHostMAC}, {47003, layers.EthernetBroadcast}}
	for _, f := range foreign {
		if err := capt.Send(synFrame(cl.MAC(), f.mac, netip.AddrPortFrom(cl.IP(), f.port), churnVIP)); err != nil {
			t.Fatalf("SYN from port %d to %v: %v", f.port, f.mac, err)
		}
	}
	want := float64(len(foreign))
	if v, ok := waitCounter(t, l, "xlb_xdp_not_ours_total", nil, 30*time.Second, func(v float64) bool { return v >= want }); !ok {
		t.Fatalf("xlb_xdp_not_ours_total %v, want the %v SYNs for other MACs counted", v, want)
	}

	// The control: XLB's own MAC. Its SYN-ACK comes after any answer to
	// the frames before it would have.
	const own = 47010
	if err := capt.Send(synFrame(cl.MAC(), l.XLB.MAC(), netip.AddrPortFrom(cl.IP(), own), churnVIP)); err != nil {
		t.Fatal(err)
	}
	answered, err := answersUntil(capt, cl.IP(), own, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range foreign {
		if a, ok := answered[f.port]; ok {
			t.Errorf("the SYN from port %d to %v was answered (%s)", f.port, f.mac, a)
		}
	}
	if v, ok := waitCounter(t, l, "xlb_connections_opened_total", nil, 30*time.Second, func(v float64) bool { return v >= 1 }); !ok || v != 1 {
		t.Fatalf("xlb_connections_opened_total %v, want 1: only the SYN to XLB's own MAC opens a pair", v)
	}
	if v := counter(t, l, "xlb_xdp_not_ours_total", nil); v != want {
		t.Fatalf("xlb_xdp_not_ours_total %v, want exactly %v", v, want)
	}
	t.Logf("%d SYNs for other MACs passed and counted, none answered; the SYN to XLB's MAC (%v) was answered: %s",
		len(foreign), l.XLB.MAC(), answered[own])
	stopXLB(t, l, p)
}

// synFrame is an Ethernet frame from srcMAC to dstMAC holding a TCP SYN
// from src to dst.
func synFrame(srcMAC, dstMAC net.HardwareAddr, src, dst netip.AddrPort) []byte {
	eth := &layers.Ethernet{SrcMAC: srcMAC, DstMAC: dstMAC, EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Flags: layers.IPv4DontFragment, Protocol: layers.IPProtocolTCP,
		SrcIP: src.Addr().AsSlice(), DstIP: dst.Addr().AsSlice()}
	tcp := &layers.TCP{SrcPort: layers.TCPPort(src.Port()), DstPort: layers.TCPPort(dst.Port()), Seq: 1000, SYN: true, Window: 64240}
	tcp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, tcp); err != nil {
		panic(err) // fixed layers: cannot fail
	}
	return buf.Bytes()
}

// answersUntil reads capt until a frame from the VIP reaches client
// port last or timeout passes, and returns the TCP flags of every frame
// from the VIP to client, by client port.
func answersUntil(capt *testnet.Capture, client netip.Addr, last uint16, timeout time.Duration) (map[uint16]string, error) {
	out := map[uint16]string{}
	buf := make([]byte, 2048)
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); {
		n, err := capt.Read(buf, 100*time.Millisecond)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return out, err
		}
		pkt := gopacket.NewPacket(buf[:n], layers.LayerTypeEthernet, gopacket.NoCopy)
		ip, ok1 := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		tcp, ok2 := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if !ok1 || !ok2 || !ip.SrcIP.Equal(churnVIP.Addr().AsSlice()) || !ip.DstIP.Equal(client.AsSlice()) ||
			uint16(tcp.SrcPort) != churnVIP.Port() {
			continue
		}
		port := uint16(tcp.DstPort)
		out[port] += tcpFlags(tcp)
		if port == last {
			return out, nil
		}
	}
	return out, errors.New("no answer to the SYN addressed to XLB's own MAC")
}

// tcpFlags names the SYN, ACK and RST flags of tcp, as "SA", "R", "RA".
func tcpFlags(tcp *layers.TCP) string {
	s := ""
	for _, f := range []struct {
		on   bool
		name string
	}{{tcp.SYN, "S"}, {tcp.RST, "R"}, {tcp.ACK, "A"}} {
		if f.on {
			s += f.name
		}
	}
	return "[" + s + "]"
}
