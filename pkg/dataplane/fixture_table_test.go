package dataplane_test

import (
	"net"
	"net/netip"
	"slices"

	"github.com/google/gopacket/layers"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// The words of the packet-fixture tables (fixtures_test.go,
// close_fixtures_test.go, shutdown_fixtures_test.go, replace_test.go). A
// row is plain values: the environment, the frames sent before, the input
// frame by its fields, the expected action, the expected output frame by
// what XLB rewrote, and the expected counters and pair state afterwards.
// fixture_runner_test.go interprets every row the same way.

// fixture is one row of a packet-fixture table.
type fixture struct {
	Name string

	// Setup, in this order.
	Env      dt.Options // zero: one-arm, three backends, 80->8080 and 443->8443, SNAT ports 40000-40009
	Given    []seg      // frames sent first; each must be forwarded (XDP_TX or XDP_REDIRECT)
	Shutdown shutdown   // the shutdown flag, set after the Given frames
	Break    breakage   // map surgery after that, to build a broken pair

	// The input and what comes out.
	In     seg
	Action uint32 // dt.XDPPass, dt.XDPTX, dt.XDPRedirect
	Out    out

	// State afterwards.
	Counted counted  // exact change of every counter by the input, but Actions: the runner expects +1 for Action
	Closed  closures // the closure counters since load: how Given and In together counted the connection's end
	Entries int      // flow map entries
	Pair    pair     // the pair cli:33000 -> listen:80
}

// counted is a change of the data path counters.
type counted = dataplane.Counters

// closures are the closure counters by initiator and reason
// (dataplane.Counters.ClosedClientFIN and the three after it).
type closures struct{ ClientFIN, BackendFIN, ClientRST, BackendRST uint64 }

// side is who sends a frame.
type side int

const (
	// client: cli's address, port seg.CPort, to listen:seg.LPort; arrives
	// on the client-side interface.
	client side = iota
	// backend: the environment's first backend, port 8080, to the SNAT
	// address, port seg.SNAT; arrives on the backend-side interface.
	backend
)

// seg is a frame by its fields. Zero fields take the defaults noted.
type seg struct {
	From     side
	CPort    uint16 // client port; default 33000
	LPort    uint16 // listen port of a client frame; default 80
	SNAT     uint16 // SNAT port of a backend frame; default 40000
	Flags    uint8  // dt.FIN|SYN|RST|PSH|ACK
	Seq, Ack uint32
	MSS      bool   // an MSS option (1460)
	Data     []byte // TCP payload
	TTL      uint8  // default 64

	// Frames XLB must leave alone.
	Proto      dt.Proto   // default TCP; UDP, ICMP (an echo request) or ARP (a request for the destination address)
	IPv6       bool       // from 2001:db8::20 to 2001:db8::10
	Dst        netip.Addr // another destination address
	IPOptions  bool       // four bytes of IPv4 options: three NOPs and an end of list
	MF         bool       // IPv4 more-fragments
	FragOffset uint16     // IPv4 fragment offset, in 8-byte units
	DataOffset uint8      // TCP data offset written over the built one, in 32-bit words
	CutTo      int        // the frame cut to this many bytes
	CutTail    int        // this many bytes cut off the frame's end

	// DstMAC: a destination MAC other than the ingress interface's
	// (another host's, a group address; ours_fixtures_test.go).
	DstMAC net.HardwareAddr
}

// dest is where the output frame goes.
type dest int

const (
	// unchanged: the input, byte for byte.
	unchanged dest = iota
	// toBackend: the input rewritten toward a backend: Ethernet from the
	// backend-side interface to MAC(backend), IPv4 from the SNAT address
	// port out.SNAT to the backend port out.Port, TTL one less; every other
	// field as it came.
	toBackend
	// toClient: the input rewritten toward cli:33000: Ethernet from the
	// client-side interface to MAC(client), IPv4 from listen port out.Port,
	// TTL one less; every other field as it came.
	toClient
	// reset: a RST|ACK back to the sender, generated: MACs, addresses and
	// ports swapped, sequence out.Seq, acknowledgement out.Ack, TTL 64, no
	// options, no payload, no Ethernet padding.
	reset
)

// out is the expected output frame.
type out struct {
	To       dest
	Backend  int    // toBackend: index of the environment's backend
	Port     uint16 // toBackend: the backend's port; toClient: the listen port
	SNAT     uint16 // toBackend: the SNAT port
	Seq, Ack uint32 // reset
}

// shutdown is the state of the shutdown flag for the input.
type shutdown int

const (
	running         shutdown = iota
	shutdownSet              // set after the Given frames
	shutdownCleared          // set, then cleared again (a shutdown abandoned; the daemon never clears it)
)

// breakage is map surgery on the pair cli:33000 -> listen:80 before the
// input, through the map API.
type breakage int

const (
	intact       breakage = iota
	dropReverse           // the reverse entry deleted
	dropForward           // the forward entry deleted
	otherReverse          // the reverse entry re-stamped with generation +1000, as if its key had been freed and taken by another pair
)

// pairIs is what became of the pair cli:33000 -> listen:80.
type pairIs int

const (
	// none: no forward entry for it.
	none pairIs = iota
	// opened: no forward entry before the input, a linked pair after.
	opened
	// kept: a linked pair with the generation it had before the input.
	kept
	// replaced: a linked pair of a new generation; the old reverse key
	// holds nothing of the old pair (after otherReverse, still the other
	// pair's entry).
	replaced
	// lone: a forward entry whose counterpart is missing or belongs to
	// another generation; only its flags are checked.
	lone
)

// pair is the expected pair cli:33000 -> listen:80 after the input. A
// linked pair is checked whole: both keys, peers, one non-zero generation,
// backend ids, recipes (backend port from the port map, listen port 80
// back), the flags of both entries and a forward last_seen not after the
// clock.
type pair struct {
	Is       pairIs
	Backend  int    // index (and backend id) of the environment's backend
	SNAT     uint16 // the SNAT port; default 40000
	Flags    uint32 // the forward entry's flags: handshake (est) and close state
	Rev      uint32 // the reverse entry's flags (revEst, freed)
	Terminal bool   // dataplane.Terminal(Flags)
	// Frozen: the input comes a clock tick after the Given frames, on a
	// pair already terminal; the forward entry's last_seen (the terminal
	// moment) must not move, the reverse entry's only when the input came
	// from the backend.
	Frozen bool
	// Held (replaced): the old pair's backend closed first and holds
	// TIME_WAIT, so its reverse entry stays as a hold entry (FlagHold, the
	// old generation, last_seen = the old pair's terminal moment) instead
	// of going (DESIGN §6b "SNAT reuse").
	Held bool
}

// Flags of a pair's entries.
const (
	finC    = dataplane.FlagFINClient
	finB    = dataplane.FlagFINBackend
	rstC    = dataplane.FlagRSTClient
	rstB    = dataplane.FlagRSTBackend
	initB   = dataplane.FlagInitBackend
	closedF = dataplane.FlagClosedFIN
	closedR = dataplane.FlagClosedRST

	// est: the forward entry after the handshake (the backend's SYN-ACK
	// went through, the client ACKed it and so sent an ACK itself).
	est = dataplane.FlagSYNACK | dataplane.FlagEstablished | dataplane.FlagACKSeen
	// revEst: the reverse entry after the handshake (established, and
	// the backend's SYN-ACK was an ACK).
	revEst = dataplane.FlagEstablished | dataplane.FlagACKSeen
	// freed: the reverse entry of a pair that ended leaving the backend
	// no TIME_WAIT (the client's FIN first, or a RST): its SNAT port is free.
	freed = dataplane.FlagPortFreed
)

// The connection every table talks about: cli:33000 -> listen:80, sent to
// backend 1 (index 0, port 8080) from SNAT port 40000. Client ISN 1000,
// backend ISN 5000; neither SYN carries a window scale, so every window
// is the segments' own (65160): every FIN and RST below lies in its
// receiver's window.
var (
	cli     = dt.Client(33000)
	mss     = []layers.TCPOption{{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: []byte{0x05, 0xb4}}}
	payload = []byte("GET / HTTP/1.1\r\nHost: example\r\n\r\n")

	// The handshake: the client's SYN, the backend's SYN-ACK, the client's ACK.
	syn          = seg{Flags: dt.SYN, Seq: 1000, MSS: true}
	synAck       = seg{From: backend, Flags: dt.SYN | dt.ACK, Seq: 5000, Ack: 1001, MSS: true}
	handshakeACK = seg{Flags: dt.ACK, Seq: 1001, Ack: 5001}

	clientFIN  = seg{Flags: dt.FIN | dt.ACK, Seq: 1001, Ack: 5001}
	backendFIN = seg{From: backend, Flags: dt.FIN | dt.ACK, Seq: 5001, Ack: 1001}
	clientRST  = seg{Flags: dt.RST | dt.ACK, Seq: 1001, Ack: 5001}
	backendRST = seg{From: backend, Flags: dt.RST, Seq: 5001}
	// clientFIN2 is the client's FIN after the backend's, acknowledging it.
	clientFIN2 = seg{Flags: dt.FIN | dt.ACK, Seq: 1001, Ack: 5002}
	// backendFIN2 is the backend's FIN after the client's, acknowledging it.
	backendFIN2 = seg{From: backend, Flags: dt.FIN | dt.ACK, Seq: 5001, Ack: 1002}
	// clientRST2 and backendRST2 follow both FINs: each sender's FIN took
	// one sequence number.
	clientRST2  = seg{Flags: dt.RST | dt.ACK, Seq: 1002, Ack: 5002}
	backendRST2 = seg{From: backend, Flags: dt.RST, Seq: 5002}

	// embryonic is a pair whose backend has not answered yet.
	embryonic = []seg{syn}
	// established is a pair after the whole handshake.
	established = []seg{syn, synAck, handshakeACK}
	// toB1 is a frame forwarded on the established pair toward its backend.
	toB1 = out{To: toBackend, Backend: 0, Port: 8080, SNAT: 40000}
	// toCli is a frame forwarded on the established pair toward the client.
	toCli = out{To: toClient, Port: 80}
	// openPair is the established pair, untouched.
	openPair = pair{Is: kept, Flags: est, Rev: revEst}
	// embryonicPair is the pair of a SYN only, untouched.
	embryonicPair = pair{Is: kept}
)

// establishedThen is the handshake followed by segs.
func establishedThen(segs ...seg) []seg {
	return append(slices.Clone(established), segs...)
}

// synFrom is the SYN of syn from client c to listen:port.
func synFrom(e *dt.Env, c netip.AddrPort, port uint16) dt.Segment {
	s := e.FromClient(c, port, dt.SYN, 1000, 0, nil)
	s.Options = mss
	return s
}
