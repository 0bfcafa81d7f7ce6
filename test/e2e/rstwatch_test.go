package e2e

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/test/lab"
)

// The two endpoints of a connection through XLB, as rstWatch names them.
const (
	endClient = iota
	endBackend
)

var endName = [2]string{"client", "backend"}

// rstWatch follows the SYNs, FINs and RSTs of connections through XLB
// from a capture on each endpoint's side of it (a router's interface
// toward XLB): every RST an endpoint sent toward XLB, when it sent it
// (before or after its connection's close) and whether XLB forwarded it
// to the other side. A connection is known on both sides by the client's
// initial sequence number (XLB translates addresses and ports, not
// sequence numbers).
type rstWatch struct {
	mu    sync.Mutex
	conns map[uint32]*watchedConn // by the client's ISN
	ports [2]map[[2]uint16]uint32 // per side: (endpoint's port, XLB's port) → the client's ISN
	errs  []error
	stop  chan struct{}
	wg    sync.WaitGroup
}

// watchedConn is what one side's capture saw of a connection, per
// endpoint (endClient, endBackend).
type watchedConn struct {
	finSent [2]bool   // the endpoint sent its FIN
	finSeq  [2]uint32 // that FIN's sequence number
	finGot  [2]bool   // the other endpoint's FIN reached the endpoint's side
	sent    [2][]watchedRST
	arrived [2]map[uint32]int // RSTs of the endpoint XLB forwarded, by sequence number: how many
}

// watchedRST is one RST an endpoint sent toward XLB.
type watchedRST struct {
	seq uint32
	// afterClose: the endpoint had sent its FIN and received the other's
	// (the connection had closed, as far as its side of XLB shows).
	afterClose bool
}

// rstSide is one endpoint's side of XLB: the host and interface
// captured (between the endpoint and XLB) and the endpoint's address. A
// connection is named there by the endpoint's port and XLB's (its listen
// port on the client's side, the SNAT port on the backend's).
type rstSide struct {
	host   *lab.Host
	ifname string
	peer   netip.Addr
}

// watchRSTs starts capturing on both sides; open the connections after
// it returns, read report once they are done, and close it.
func watchRSTs(client, backend rstSide) (*rstWatch, error) {
	w := &rstWatch{conns: map[uint32]*watchedConn{}, stop: make(chan struct{})}
	for end, side := range [2]rstSide{client, backend} {
		w.ports[end] = map[[2]uint16]uint32{}
		capt, err := side.host.Capture(side.ifname)
		if err == nil {
			err = capt.Filter(synFinRst)
		}
		if err != nil {
			close(w.stop)
			w.wg.Wait()
			if capt != nil {
				capt.Close()
			}
			return nil, err
		}
		w.wg.Add(1)
		go w.read(capt, end, side.peer)
	}
	return w, nil
}

// synFinRst is a classic BPF filter that keeps the Ethernet frames of
// IPv4 TCP segments (first fragments included, later ones not) with SYN,
// FIN or RST set: a capture of a bulk transfer keeps up.
var synFinRst = []unix.SockFilter{
	{Code: unix.BPF_LD | unix.BPF_H | unix.BPF_ABS, K: 12},              // EtherType
	{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: 0x0800, Jf: 8},  //   IPv4
	{Code: unix.BPF_LD | unix.BPF_B | unix.BPF_ABS, K: 14 + 9},          // protocol
	{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: 6, Jf: 6},       //   TCP
	{Code: unix.BPF_LD | unix.BPF_H | unix.BPF_ABS, K: 14 + 6},          // fragment offset
	{Code: unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K, K: 0x1fff, Jt: 4}, //   a later fragment
	{Code: unix.BPF_LDX | unix.BPF_B | unix.BPF_MSH, K: 14},             // X = IPv4 header length
	{Code: unix.BPF_LD | unix.BPF_B | unix.BPF_IND, K: 14 + 13},         // TCP flags
	{Code: unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K, K: 0x07, Jf: 1},   //   FIN, SYN or RST
	{Code: unix.BPF_RET | unix.BPF_K, K: 1 << 16},                       // keep
	{Code: unix.BPF_RET | unix.BPF_K, K: 0},                             // drop
}

func (w *rstWatch) read(capt *testnet.Capture, end int, peer netip.Addr) {
	defer w.wg.Done()
	defer capt.Close()
	err := capt.ReadUntil(w.stop, func(frame []byte) {
		pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.DecodeOptions{Lazy: true, NoCopy: true})
		ip, ok := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		if !ok {
			return
		}
		tcp, ok := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if !ok {
			return
		}
		src, _ := netip.AddrFromSlice(ip.SrcIP)
		fromPeer := src == peer
		key := [2]uint16{uint16(tcp.DstPort), uint16(tcp.SrcPort)}
		if fromPeer {
			key = [2]uint16{uint16(tcp.SrcPort), uint16(tcp.DstPort)}
		}
		w.mu.Lock()
		w.segment(end, key, fromPeer, tcp)
		w.mu.Unlock()
	})
	if err != nil {
		w.mu.Lock()
		w.errs = append(w.errs, fmt.Errorf("capture on the %s's side: %w", endName[end], err))
		w.mu.Unlock()
	}
}

// segment records one captured segment on end's side; fromPeer: the
// endpoint sent it toward XLB (else XLB sent it to the endpoint).
func (w *rstWatch) segment(end int, key [2]uint16, fromPeer bool, tcp *layers.TCP) {
	if tcp.SYN && !tcp.ACK && fromPeer == (end == endClient) {
		// the client's SYN: on the client's side as it sent it, on the
		// backend's as XLB forwarded it
		c := w.conns[tcp.Seq]
		if c == nil {
			c = &watchedConn{arrived: [2]map[uint32]int{{}, {}}}
			w.conns[tcp.Seq] = c
		}
		w.ports[end][key] = tcp.Seq
		return
	}
	isn, ok := w.ports[end][key]
	if !ok {
		return // not a connection of the watch
	}
	c := w.conns[isn]
	other := 1 - end
	switch {
	case fromPeer && tcp.RST:
		c.sent[end] = append(c.sent[end], watchedRST{seq: tcp.Seq, afterClose: c.finSent[end] && c.finGot[end]})
	case !fromPeer && tcp.RST:
		c.arrived[other][tcp.Seq]++
	case fromPeer && tcp.FIN:
		c.finSent[end], c.finSeq[end] = true, tcp.Seq
	case !fromPeer && tcp.FIN:
		c.finGot[end] = true
	}
}

// rstReport is what rstWatch saw: the RSTs endpoints sent toward XLB
// and those XLB did not forward, each described.
type rstReport struct {
	sent, forwarded int
	// forwardedAt counts the forwarded RSTs by their sequence number
	// relative to their sender's FIN's (0: the FIN's own, 1: just past
	// it); otherAt those of a sender without a FIN or elsewhere
	forwardedAt map[int32]int
	otherAt     int
	dropped     []string // one line per RST XLB did not forward
	unexplained []string // dropped RSTs other than stale answers after the close
	invented    []string // RSTs that reached an endpoint that the other endpoint never sent
}

// report sorts out the RSTs captured so far. A RST an endpoint
// sent that XLB did not forward is explained when the endpoint sent it
// after its connection closed (its FIN sent, the other's received) with
// a sequence number before its own FIN's: the receiver had already
// acknowledged everything up to and including that FIN, so the RST is
// older than the receiver's RCV.NXT and outside its window (RFC 5961 §3;
// a receiver in TIME-WAIT discards it).
func (w *rstWatch) report() (rstReport, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := rstReport{forwardedAt: map[int32]int{}}
	if err := errors.Join(w.errs...); err != nil {
		return r, err
	}
	for isn, c := range w.conns {
		for end := range 2 {
			left := map[uint32]int{}
			for seq, n := range c.arrived[end] {
				left[seq] = n
			}
			for _, rst := range c.sent[end] {
				r.sent++
				rel := int32(rst.seq - c.finSeq[end])
				if left[rst.seq] > 0 {
					left[rst.seq]--
					r.forwarded++
					if c.finSent[end] && (rel == 0 || rel == 1) {
						r.forwardedAt[rel]++
					} else {
						r.otherAt++
					}
					continue
				}
				line := fmt.Sprintf("conn %#x: the %s's RST seq %d (%+d from its FIN), after the close %v", isn, endName[end], rst.seq, rel, rst.afterClose)
				r.dropped = append(r.dropped, line)
				if !rst.afterClose || !c.finSent[end] || rel >= 0 {
					r.unexplained = append(r.unexplained, line)
				}
			}
			for seq, n := range left {
				if n > 0 {
					r.invented = append(r.invented, fmt.Sprintf("conn %#x: %d RSTs seq %d reached the %s, not sent by the %s", isn, n, seq, endName[1-end], endName[end]))
				}
			}
		}
	}
	sort.Strings(r.dropped)
	sort.Strings(r.unexplained)
	sort.Strings(r.invented)
	return r, nil
}

// close stops the captures.
func (w *rstWatch) close() {
	close(w.stop)
	w.wg.Wait()
}

// firstLines is the first n of lines, for a failure message.
func firstLines(lines []string, n int) string {
	if len(lines) > n {
		return strings.Join(lines[:n], "\n") + fmt.Sprintf("\n... (%d more)", len(lines)-n)
	}
	return strings.Join(lines, "\n")
}
