package dataplane_test

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// TTL fixtures (issue 13 "TTL <= 1 is mishandled"; plan13 data path rule
// 6): a balanced packet (a SYN to a listen port, or any packet of a pair)
// whose TTL would expire here is dropped and counted
// (Counters.TTLExceeded), and a SYN with such a TTL never creates a pair.
// A packet XLB does not balance is the host's business, whatever its TTL.
func TestTTLExceededFixtures(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	for _, ttl := range []uint8{1, 0} {
		f := withTTL(synFrom(e, dt.Client(33001), 80).Frame(), ttl)
		step(t, e, fmt.Sprintf("SYN with TTL %d", ttl), f, e.Front, dt.XDPDrop, nil, counted{TTLExceeded: 1})
		if n := len(e.Flows(t)); n != 0 {
			t.Fatalf("a SYN with TTL %d created %d entries", ttl, n)
		}
	}
	other := synFrom(e, dt.Client(33001), 22)
	other.TTL = 1
	step(t, e, "SYN with TTL 1 to a port XLB does not balance", other.Frame(), e.Front, dt.XDPPass, other.Frame(), counted{})
	stray := e.FromBackend(netip.AddrPortFrom(e.Backends[0], 8080), 40005, dt.ACK, isnB+1, isnC+1, nil)
	stray.TTL = 1
	step(t, e, "ACK with TTL 1 to a SNAT port of no pair", stray.Frame(), e.BackendIface(), dt.XDPPass, stray.Frame(), counted{})

	k := dial(t, e, 33000, synOptions(-1))
	k.handshake(synAckOptions(-1), 1000)
	p := k.now()
	expiring := k.client(dt.ACK|dt.PSH, isnC+1, isnB+1, 1000, payload)
	expiring.TTL = 1
	k.drop("client data with TTL 1", expiring, counted{TTLExceeded: 1})
	back := k.backend(dt.ACK, isnB+1, isnC+1, 2000, nil)
	back.TTL = 1
	k.drop("backend ACK with TTL 1", back, counted{TTLExceeded: 1})
	fin := k.client(dt.FIN|dt.ACK, isnC+1, isnB+1, 1000, nil)
	fin.TTL = 1
	k.drop("client FIN with TTL 1", fin, counted{TTLExceeded: 1})
	if q := k.now(); q.Fwd.Generation != p.Fwd.Generation || q.Fwd.Flags != p.Fwd.Flags {
		t.Fatalf("pair after dropped packets: generation %d flags %#x, was %d %#x", q.Fwd.Generation, q.Fwd.Flags, p.Fwd.Generation, p.Fwd.Flags)
	}

	// TTL 2 still goes through, leaving with 1.
	last := k.client(dt.ACK|dt.PSH, isnC+1, isnB+1, 1000, payload)
	last.TTL = 2
	k.forward("client data with TTL 2", last, counted{})
}

// withTTL is an Ethernet/IPv4/TCP frame rebuilt by gopacket with another
// TTL (dt.Segment takes TTL 0 for its default).
func withTTL(f []byte, ttl uint8) []byte {
	p := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
	eth, ip, tcp := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet), p.Layer(layers.LayerTypeIPv4).(*layers.IPv4), p.Layer(layers.LayerTypeTCP).(*layers.TCP)
	ip.TTL = ttl
	if err := tcp.SetNetworkLayerForChecksum(ip); err != nil {
		panic(err)
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		eth, ip, tcp, gopacket.Payload(tcp.Payload)); err != nil {
		panic(err)
	}
	return bytes.Clone(buf.Bytes())
}
