package e2e

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/test/lab"
	"github.com/xlbproject/xlb/test/xlbproc"
)

// RST storm sizes: spoofed resets per held connection and direction, and
// the pace (a veth with an XDP program has a 256-frame ring: bursts
// beyond it are dropped before XLB sees them).
const (
	stormConns    = 20
	stormPerDir   = 100
	stormBurst    = 32
	stormBurstGap = time.Millisecond
)

// A storm of spoofed RSTs that carry the real 4-tuples of established
// connections, in both directions, but sequence numbers outside the
// receiver's window (RFC 5961 §3): XLB drops and counts every one
// (xlb_rst_out_of_window_total), and no connection dies. A legitimate
// RST (a close with SO_LINGER 0) still ends its pair.
func TestCapacityRSTStorm(t *testing.T) {
	r := startRSTRun(t, stormConns, 50*time.Millisecond)
	sent := float64(r.spoof(t, stormPerDir, rand.New(rand.NewPCG(13, 5961)), outOfWindow))
	got, ok := waitCounter(t, r.l.Lab, "xlb_rst_out_of_window_total", nil, 30*time.Second, func(v float64) bool { return v >= sent })
	t.Logf("%v spoofed out-of-window RSTs on %d connections; xlb_rst_out_of_window_total %v", sent, stormConns, got)
	if !ok {
		t.Fatalf("xlb_rst_out_of_window_total %v, want the %v spoofed RSTs counted", got, sent)
	}
	if got != sent {
		t.Fatalf("xlb_rst_out_of_window_total %v, want exactly the %v spoofed RSTs", got, sent)
	}
	r.held.halt()
	r.held.check(t, "after the storm")

	r.legitimateRST(t)
	if v := counter(t, r.l.Lab, "xlb_rst_out_of_window_total", nil); v != sent {
		t.Fatalf("xlb_rst_out_of_window_total %v after the legitimate RST, want still %v", v, sent)
	}
	rounds := r.held.finish(t)
	t.Logf("%d connections survived the storm (%d round trips); the legitimate RST ended its pair", len(r.held.conns), rounds)
	stopXLB(t, r.l.Lab, r.p)
}

// rstRun is the setup of the spoofed-RST tests: a tuple lab with the
// daemon on labConfig, connections held through it and their initial
// sequence numbers.
type rstRun struct {
	l    *tupleLab
	p    *xlbproc.Proc
	held *heldSet
	seqs map[uint16]connISNs
}

// startRSTRun holds conns connections (a round trip on each every every;
// 0: none) and learns their ISNs.
func startRSTRun(t *testing.T, conns int, every time.Duration) *rstRun {
	t.Helper()
	r := &rstRun{l: newTupleLab(t)}
	r.p = startXLB(t, r.l.Lab, labConfig(r.l.Lab, ""))
	isns, err := captureISNs(r.l.Client())
	if err != nil {
		t.Fatal(err)
	}
	r.held = holdConnections(t, r.l.Client(), conns, every)
	if r.seqs, err = isns.wait(r.held.conns, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	return r
}

// spoof sends perDir RSTs per held connection and direction, in a random
// order and in bursts the veths take, each at the offset off gives from
// the sender's ISN, from the client's namespace with raw sockets, and
// returns how many it sent.
func (r *rstRun) spoof(t *testing.T, perDir int, rng *rand.Rand, off func(*rand.Rand) uint32) int {
	t.Helper()
	raw, err := r.l.Client().RawIPv4()
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var pkts [][]byte
	for _, hc := range r.held.conns {
		s := r.seqs[hc.client.Port()]
		for range perDir {
			// Toward the backend, as from the client; toward the
			// client, as from the backend.
			pkts = append(pkts, spoofedRST(hc.client, churnVIP, s.client+off(rng), rng))
			pkts = append(pkts, spoofedRST(hc.backend, hc.snat, s.backend+off(rng), rng))
		}
	}
	rng.Shuffle(len(pkts), func(i, j int) { pkts[i], pkts[j] = pkts[j], pkts[i] })
	for i, pkt := range pkts {
		if err := raw.Send(pkt); err != nil {
			t.Fatalf("spoofed RST %d: %v", i, err)
		}
		if i%stormBurst == stormBurst-1 {
			time.Sleep(stormBurstGap)
		}
	}
	return len(pkts)
}

// legitimateRST closes the first held connection with SO_LINGER 0 (an
// exact RST from the client) and waits until its backend saw the reset
// and the daemon counted one more pair closed by a client RST.
func (r *rstRun) legitimateRST(t *testing.T) {
	t.Helper()
	victim := r.held.conns[0]
	r.held.remove(victim)
	before := counter(t, r.l.Lab, "xlb_connections_closed_total", map[string]string{"initiator": "client", "reason": "rst"})
	if err := victim.c.SetLinger(0); err != nil {
		t.Fatal(err)
	}
	victim.c.Close()
	srv := r.l.servers[backendIndex(t, r.l.Lab, victim.backend.Addr())]
	if err := waitResets(srv, 1, 30*time.Second); err != nil {
		t.Fatalf("the backend of the reset connection: %v", err)
	}
	if v, ok := waitCounter(t, r.l.Lab, "xlb_connections_closed_total", map[string]string{"initiator": "client", "reason": "rst"}, 30*time.Second,
		func(v float64) bool { return v >= before+1 }); !ok {
		t.Fatalf("closed by a client RST: %v, want %v: the legitimate RST did not end its pair", v, before+1)
	}
}

// outOfWindow is an offset from a direction's initial sequence number
// that no window can reach: between 2^29 and 2^32 - 2^29 (a window is at
// most 2^30 with scaling, and the held connections move a few hundred
// kilobytes).
func outOfWindow(rng *rand.Rand) uint32 { return 1<<29 + rng.Uint32N(1<<32-1<<30) }

// spoofedRST is an IPv4 TCP RST from src to dst with sequence number seq;
// every other one also carries ACK with a random acknowledgment number.
func spoofedRST(src, dst netip.AddrPort, seq uint32, rng *rand.Rand) []byte {
	ip := &layers.IPv4{Version: 4, TTL: 64, Id: uint16(rng.Uint32()), Protocol: layers.IPProtocolTCP, SrcIP: src.Addr().AsSlice(), DstIP: dst.Addr().AsSlice()}
	tcp := &layers.TCP{SrcPort: layers.TCPPort(src.Port()), DstPort: layers.TCPPort(dst.Port()), Seq: seq, RST: true}
	if rng.IntN(2) == 0 {
		tcp.ACK, tcp.Ack = true, rng.Uint32()
	}
	tcp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ip, tcp); err != nil {
		panic(err) // fixed layers: cannot fail
	}
	return buf.Bytes()
}

// connISNs are the initial sequence numbers of one connection: the
// client's (its SYN) and the backend's (its SYN-ACK; XLB translates
// addresses and ports, not sequence numbers).
type connISNs struct{ client, backend uint32 }

// isnCapture records the ISNs of the client's connections to listenAddr
// by client port, from a capture on the client's eth0.
type isnCapture struct {
	mu   sync.Mutex
	seen map[uint16]*connISNs
	syn  map[uint16]bool
	ack  map[uint16]bool
	err  error
	stop chan struct{}
	done chan struct{}
}

// captureISNs starts capturing on client's eth0; open the connections
// after it returns.
func captureISNs(client *lab.Host) (*isnCapture, error) {
	capt, err := client.Capture("eth0")
	if err != nil {
		return nil, err
	}
	c := &isnCapture{seen: map[uint16]*connISNs{}, syn: map[uint16]bool{}, ack: map[uint16]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	go c.read(capt)
	return c, nil
}

func (c *isnCapture) read(capt *testnet.Capture) {
	defer close(c.done)
	defer capt.Close()
	err := capt.ReadUntil(c.stop, func(frame []byte) {
		pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.NoCopy)
		tcp, ok := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if !ok || !tcp.SYN {
			return
		}
		c.mu.Lock()
		switch {
		case !tcp.ACK && uint16(tcp.DstPort) == churnVIP.Port():
			c.entry(uint16(tcp.SrcPort)).client = tcp.Seq
			c.syn[uint16(tcp.SrcPort)] = true
		case tcp.ACK && uint16(tcp.SrcPort) == churnVIP.Port():
			c.entry(uint16(tcp.DstPort)).backend = tcp.Seq
			c.ack[uint16(tcp.DstPort)] = true
		}
		c.mu.Unlock()
	})
	if err != nil {
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
	}
}

func (c *isnCapture) entry(port uint16) *connISNs {
	e := c.seen[port]
	if e == nil {
		e = &connISNs{}
		c.seen[port] = e
	}
	return e
}

// wait returns the ISNs of conns by client port once the capture saw
// both handshake halves of each, and stops the capture.
func (c *isnCapture) wait(conns []*heldConn, timeout time.Duration) (map[uint16]connISNs, error) {
	defer func() { close(c.stop); <-c.done }()
	deadline := time.Now().Add(timeout)
	for {
		c.mu.Lock()
		missing, err := 0, c.err
		out := map[uint16]connISNs{}
		for _, hc := range conns {
			port := hc.client.Port()
			if !c.syn[port] || !c.ack[port] {
				missing++
				continue
			}
			out[port] = *c.seen[port]
		}
		c.mu.Unlock()
		if err != nil {
			return nil, fmt.Errorf("capture: %w", err)
		}
		if missing == 0 {
			return out, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the capture saw the handshakes of %d of %d connections", len(conns)-missing, len(conns))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// backendIndex is the index of the backend with address ip.
func backendIndex(t testing.TB, l *lab.Lab, ip netip.Addr) int {
	t.Helper()
	for i, b := range l.Backends {
		if b.IP() == ip {
			return i
		}
	}
	t.Fatalf("no backend %v", ip)
	return -1
}

// waitResets polls until s has recorded at least n connections reset by
// the peer.
func waitResets(s *testnet.Server, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		st := s.Stats()
		if st.Resets >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d connections reset by the client, want %d (stats %+v)", st.Resets, n, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
