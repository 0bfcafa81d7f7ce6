package dataplane_test

import (
	"net"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// pktCase is one named packet fixture: frames sent first (each must be
// forwarded), then the input, the expected action and the exact expected
// output frame (nil: the frame must come back unchanged), and optional checks
// of the map and counters afterwards.
type pktCase struct {
	name   string
	opts   dt.Options
	setup  func(e *dt.Env) []dt.Segment
	input  func(e *dt.Env) ([]byte, dt.Iface)
	action uint32
	want   func(e *dt.Env) []byte
	check  func(t *testing.T, e *dt.Env, before dataplane.Counters)
}

var (
	cli     = dt.Client(33000)
	b1      = netip.AddrPortFrom(dt.OneArmBackends[0], 8080)
	b2      = netip.AddrPortFrom(dt.OneArmBackends[1], 8443)
	mss     = []layers.TCPOption{{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: []byte{0x05, 0xb4}}}
	payload = []byte("GET / HTTP/1.1\r\nHost: example\r\n\r\n")
)

func synFrom(e *dt.Env, c netip.AddrPort, port uint16) dt.Segment {
	s := e.FromClient(c, port, dt.SYN, 1000, 0, nil)
	s.Options = mss
	return s
}

func clientSYN(e *dt.Env) []dt.Segment { return []dt.Segment{synFrom(e, cli, 80)} }

func onFront(f func(e *dt.Env) []byte) func(e *dt.Env) ([]byte, dt.Iface) {
	return func(e *dt.Env) ([]byte, dt.Iface) { return f(e), e.Front }
}

func serialize(ls ...gopacket.SerializableLayer) []byte {
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		panic(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

func ethTo(e *dt.Env, typ layers.EthernetType) *layers.Ethernet {
	return &layers.Ethernet{SrcMAC: dt.MAC(dt.ClientIP), DstMAC: e.Front.MAC, EthernetType: typ}
}

func ipv4To(dst netip.Addr, proto layers.IPProtocol) *layers.IPv4 {
	return &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: proto, SrcIP: dt.ClientIP.AsSlice(), DstIP: dst.AsSlice()}
}

func tcpSYN(dport uint16) *layers.TCP {
	return &layers.TCP{SrcPort: 33000, DstPort: layers.TCPPort(dport), Seq: 1000, SYN: true, Window: 64240}
}

func wantEntries(n int) func(t *testing.T, e *dt.Env, _ dataplane.Counters) {
	return func(t *testing.T, e *dt.Env, _ dataplane.Counters) {
		t.Helper()
		if got := len(e.Flows(t)); got != n {
			t.Fatalf("flow map has %d entries, want %d", got, n)
		}
	}
}

func passCase(name string, frame func(e *dt.Env) []byte) pktCase {
	return pktCase{name: name, input: onFront(frame), action: dt.XDPPass, check: wantEntries(0)}
}

func cases() []pktCase {
	return []pktCase{
		{
			name:   "first SYN creates a pair and goes to backend 1 from the SNAT address",
			input:  onFront(func(e *dt.Env) []byte { return synFrom(e, cli, 80).Frame() }),
			action: dt.XDPTX,
			want:   func(e *dt.Env) []byte { return e.ToBackend(synFrom(e, cli, 80), b1, 40000).Frame() },
			check: func(t *testing.T, e *dt.Env, before dataplane.Counters) {
				flows := e.Flows(t)
				if len(flows) != 2 {
					t.Fatalf("%d entries, want 2", len(flows))
				}
				fk := dataplane.NewFlowKey(cli, netip.AddrPortFrom(dt.ListenIP, 80), dataplane.DirClient)
				rk := dataplane.NewFlowKey(b1, netip.AddrPortFrom(dt.ListenIP, 40000), dataplane.DirBackend)
				fv, ok1 := flows[fk]
				rv, ok2 := flows[rk]
				if !ok1 || !ok2 {
					t.Fatalf("entries %v, want forward %v and reverse %v", flows, fk, rk)
				}
				if fv.Peer(fk) != rk || rv.Peer(rk) != fk {
					t.Fatalf("peers not linked: forward.peer=%v reverse.peer=%v", fv.Peer(fk), rv.Peer(rk))
				}
				if fv.Generation == 0 || fv.Generation != rv.Generation {
					t.Fatalf("generations %d/%d, want equal and non-zero", fv.Generation, rv.Generation)
				}
				if fv.BackendId != 0 || rv.BackendId != 0 {
					t.Fatalf("backend ids %d/%d, want 0", fv.BackendId, rv.BackendId)
				}
				if got := rv.NewSrc(); got != netip.AddrPortFrom(dt.ListenIP, 80) {
					t.Fatalf("reverse recipe source %v", got)
				}
				c := e.Counters(t)
				if c.PairsCreated-before.PairsCreated != 1 {
					t.Fatalf("pairs created %d, want 1", c.PairsCreated-before.PairsCreated)
				}
			},
		},
		{
			name:  "backend SYN-ACK to the SNAT port goes back to the client from listen:80",
			setup: clientSYN,
			input: onFront(func(e *dt.Env) []byte {
				return e.FromBackend(b1, 40000, dt.SYN|dt.ACK, 5000, 1001, nil).Frame()
			}),
			action: dt.XDPTX,
			want: func(e *dt.Env) []byte {
				return e.ToClient(e.FromBackend(b1, 40000, dt.SYN|dt.ACK, 5000, 1001, nil), cli, 80).Frame()
			},
		},
		{
			name:  "client data after the handshake is rewritten with its payload",
			setup: clientSYN,
			input: onFront(func(e *dt.Env) []byte {
				return e.FromClient(cli, 80, dt.ACK|dt.PSH, 1001, 5001, payload).Frame()
			}),
			action: dt.XDPTX,
			want: func(e *dt.Env) []byte {
				return e.ToBackend(e.FromClient(cli, 80, dt.ACK|dt.PSH, 1001, 5001, payload), b1, 40000).Frame()
			},
		},
		{
			name:   "retransmitted SYN reuses backend and SNAT port and adds no entry",
			setup:  clientSYN,
			input:  onFront(func(e *dt.Env) []byte { return synFrom(e, cli, 80).Frame() }),
			action: dt.XDPTX,
			want:   func(e *dt.Env) []byte { return e.ToBackend(synFrom(e, cli, 80), b1, 40000).Frame() },
			check: func(t *testing.T, e *dt.Env, before dataplane.Counters) {
				wantEntries(2)(t, e, before)
				c := e.Counters(t)
				if c.SYNReused-before.SYNReused != 1 || c.PairsCreated != before.PairsCreated {
					t.Fatalf("syn reused +%d, pairs created +%d; want +1, +0", c.SYNReused-before.SYNReused, c.PairsCreated-before.PairsCreated)
				}
			},
		},
		passCase("client SYN|ACK without a pair passes and creates nothing", func(e *dt.Env) []byte {
			return e.FromClient(cli, 80, dt.SYN|dt.ACK, 1000, 1, nil).Frame()
		}),
		passCase("bare ACK without a pair passes and creates nothing", func(e *dt.Env) []byte {
			return e.FromClient(cli, 80, dt.ACK, 1001, 1, nil).Frame()
		}),
		{
			name:   "same client address and port to a second local port is a distinct pair",
			setup:  clientSYN,
			input:  onFront(func(e *dt.Env) []byte { return synFrom(e, cli, 443).Frame() }),
			action: dt.XDPTX,
			// round robin: second pair goes to backend 2, on remote port 8443
			want:  func(e *dt.Env) []byte { return e.ToBackend(synFrom(e, cli, 443), b2, 40000).Frame() },
			check: wantEntries(4),
		},
		passCase("ARP passes", func(e *dt.Env) []byte {
			return serialize(&layers.Ethernet{SrcMAC: dt.MAC(dt.ClientIP), DstMAC: layers.EthernetBroadcast, EthernetType: layers.EthernetTypeARP},
				&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
					Operation: layers.ARPRequest, SourceHwAddress: dt.MAC(dt.ClientIP), SourceProtAddress: dt.ClientIP.AsSlice(),
					DstHwAddress: make([]byte, 6), DstProtAddress: dt.ListenIP.AsSlice()})
		}),
		passCase("IPv6 TCP SYN passes", func(e *dt.Env) []byte {
			ip6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolTCP, SrcIP: net.ParseIP("2001:db8::20"), DstIP: net.ParseIP("2001:db8::10")}
			tcp := tcpSYN(80)
			tcp.SetNetworkLayerForChecksum(ip6)
			return serialize(ethTo(e, layers.EthernetTypeIPv6), ip6, tcp)
		}),
		passCase("UDP to listen:80 passes", func(e *dt.Env) []byte {
			ip := ipv4To(dt.ListenIP, layers.IPProtocolUDP)
			udp := &layers.UDP{SrcPort: 33000, DstPort: 80}
			udp.SetNetworkLayerForChecksum(ip)
			return serialize(ethTo(e, layers.EthernetTypeIPv4), ip, udp, gopacket.Payload(payload))
		}),
		passCase("ICMP echo passes", func(e *dt.Env) []byte {
			return serialize(ethTo(e, layers.EthernetTypeIPv4), ipv4To(dt.ListenIP, layers.IPProtocolICMPv4),
				&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0), Id: 1, Seq: 1})
		}),
		passCase("IPv4 with options passes", func(e *dt.Env) []byte {
			ip := ipv4To(dt.ListenIP, layers.IPProtocolTCP)
			ip.Options = []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 0}}
			tcp := tcpSYN(80)
			tcp.SetNetworkLayerForChecksum(ip)
			return serialize(ethTo(e, layers.EthernetTypeIPv4), ip, tcp)
		}),
		passCase("first fragment (MF) passes", func(e *dt.Env) []byte {
			ip := ipv4To(dt.ListenIP, layers.IPProtocolTCP)
			ip.Flags = layers.IPv4MoreFragments
			tcp := tcpSYN(80)
			tcp.SetNetworkLayerForChecksum(ip)
			return serialize(ethTo(e, layers.EthernetTypeIPv4), ip, tcp, gopacket.Payload(payload))
		}),
		passCase("non-initial fragment passes", func(e *dt.Env) []byte {
			ip := ipv4To(dt.ListenIP, layers.IPProtocolTCP)
			ip.FragOffset = 8
			return serialize(ethTo(e, layers.EthernetTypeIPv4), ip, gopacket.Payload(make([]byte, 40)))
		}),
		passCase("truncated TCP header passes", func(e *dt.Env) []byte {
			f := synFrom(e, cli, 80).Frame()
			return f[:14+20+12]
		}),
		passCase("frame shorter than its IPv4 total length passes", func(e *dt.Env) []byte {
			f := e.FromClient(cli, 80, dt.SYN, 1000, 0, payload).Frame()
			return f[:len(f)-4]
		}),
		passCase("TCP data offset beyond the frame passes", func(e *dt.Env) []byte {
			f := synFrom(e, cli, 80).Frame()
			f[14+20+12] = 0xf0 // doff 15 = 60 bytes
			return f
		}),
		passCase("bare Ethernet header of type IPv4 passes", func(e *dt.Env) []byte {
			return synFrom(e, cli, 80).Frame()[:14]
		}),
		passCase("other destination port passes", func(e *dt.Env) []byte { return synFrom(e, cli, 22).Frame() }),
		passCase("other destination address passes", func(e *dt.Env) []byte {
			s := synFrom(e, cli, 80)
			s.Dst = netip.MustParseAddrPort("192.0.2.99:80")
			return s.Frame()
		}),
		passCase("SNAT-range port without an entry passes", func(e *dt.Env) []byte {
			return e.FromBackend(b1, 40005, dt.ACK, 1, 1, nil).Frame()
		}),
		{
			name:  "TTL 1 passes to the stack for ICMP time exceeded",
			setup: clientSYN,
			input: onFront(func(e *dt.Env) []byte {
				s := e.FromClient(cli, 80, dt.ACK, 1001, 5001, nil)
				s.TTL = 1
				return s.Frame()
			}),
			action: dt.XDPPass,
		},
		{
			name: "SNAT exhaustion answers the SYN with RST|ACK via XDP_TX",
			opts: dt.Options{SNATPortLo: 40000, SNATPortHi: 40001, Backends: dt.OneArmBackends[:1]},
			// two ports, one backend: two pairs fit, the third SYN is refused
			setup: func(e *dt.Env) []dt.Segment {
				return []dt.Segment{synFrom(e, dt.Client(33000), 80), synFrom(e, dt.Client(33001), 80)}
			},
			input: func(e *dt.Env) ([]byte, dt.Iface) {
				return synFrom(e, dt.Client(33002), 80).Frame(), e.Front
			},
			action: dt.XDPTX,
			want: func(e *dt.Env) []byte {
				s := synFrom(e, dt.Client(33002), 80)
				return dt.Segment{SrcMAC: e.Front.MAC, DstMAC: dt.MAC(dt.ClientIP), Src: s.Dst, Dst: s.Src,
					Seq: 0, Ack: 1001, Flags: dt.RST | dt.ACK}.Unpadded()
			},
			check: func(t *testing.T, e *dt.Env, before dataplane.Counters) {
				wantEntries(4)(t, e, before)
				if c := e.Counters(t); c.SNATExhausted-before.SNATExhausted != 1 {
					t.Fatalf("SNAT exhaustion counted %d, want 1", c.SNATExhausted-before.SNATExhausted)
				}
			},
		},
		{
			name:  "full flow table answers the SYN with RST|ACK",
			opts:  dt.Options{MaxConnections: 1},
			setup: clientSYN,
			input: func(e *dt.Env) ([]byte, dt.Iface) {
				return synFrom(e, dt.Client(33001), 80).Frame(), e.Front
			},
			action: dt.XDPTX,
			want: func(e *dt.Env) []byte {
				s := synFrom(e, dt.Client(33001), 80)
				return dt.Segment{SrcMAC: e.Front.MAC, DstMAC: dt.MAC(dt.ClientIP), Src: s.Dst, Dst: s.Src,
					Seq: 0, Ack: 1001, Flags: dt.RST | dt.ACK}.Unpadded()
			},
			check: func(t *testing.T, e *dt.Env, before dataplane.Counters) {
				wantEntries(2)(t, e, before)
				if c := e.Counters(t); c.TableFull-before.TableFull != 1 {
					t.Fatalf("table full counted %d, want 1", c.TableFull-before.TableFull)
				}
			},
		},
		{
			name:   "two-arm SYN is redirected to the backend-side interface",
			opts:   dt.Options{TwoArm: true},
			input:  onFront(func(e *dt.Env) []byte { return synFrom(e, cli, 80).Frame() }),
			action: dt.XDPRedirect,
			want: func(e *dt.Env) []byte {
				return e.ToBackend(synFrom(e, cli, 80), netip.AddrPortFrom(dt.TwoArmBackends[0], 8080), 40000).Frame()
			},
		},
		{
			name:  "two-arm backend reply is redirected to the client-side interface",
			opts:  dt.Options{TwoArm: true},
			setup: clientSYN,
			input: func(e *dt.Env) ([]byte, dt.Iface) {
				return e.FromBackend(netip.AddrPortFrom(dt.TwoArmBackends[0], 8080), 40000, dt.SYN|dt.ACK, 5000, 1001, nil).Frame(), e.Back
			},
			action: dt.XDPRedirect,
			want: func(e *dt.Env) []byte {
				return e.ToClient(e.FromBackend(netip.AddrPortFrom(dt.TwoArmBackends[0], 8080), 40000, dt.SYN|dt.ACK, 5000, 1001, nil), cli, 80).Frame()
			},
		},
	}
}

func TestPacketFixtures(t *testing.T) {
	for _, tc := range cases() {
		t.Run(tc.name, func(t *testing.T) {
			runCase(t, tc)
		})
	}
}

func runCase(t *testing.T, tc pktCase) {
	t.Helper()
	e := dt.NewEnv(t, tc.opts)
	if tc.setup != nil {
		for _, s := range tc.setup(e) {
			in := e.Front
			if s.Src.Addr() != dt.ClientIP && s.Src.Addr() != dt.Client2IP {
				in = e.BackendIface()
			}
			act, _, err := e.Run(s.Frame(), in)
			if err != nil || (act != dt.XDPTX && act != dt.XDPRedirect) {
				t.Fatalf("setup frame %+v: action %s err %v", s, dt.ActionName(act), err)
			}
		}
	}
	before := e.Counters(t)
	in, ifc := tc.input(e)
	act, out, err := e.Run(in, ifc)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if act != tc.action {
		t.Fatalf("action %s, want %s", dt.ActionName(act), dt.ActionName(tc.action))
	}
	want := in
	if tc.want != nil {
		want = tc.want(e)
	}
	if d := dt.Diff(out, want); d != "" {
		t.Fatalf("output frame differs:\n%s", d)
	}
	if tc.want != nil {
		if err := dt.VerifyChecksums(out); err != nil {
			t.Fatalf("checksums: %v", err)
		}
	}
	after := e.Counters(t)
	if after.Actions[0] != 0 {
		t.Fatalf("XDP_ABORTED counted %d times", after.Actions[0])
	}
	if got := after.Actions[act] - before.Actions[act]; got != 1 {
		t.Fatalf("action counter for %s moved by %d, want 1", dt.ActionName(act), got)
	}
	if tc.check != nil {
		tc.check(t, e, before)
	}
}
