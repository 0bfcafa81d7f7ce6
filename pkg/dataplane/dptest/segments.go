package dptest

import (
	"encoding/binary"
	"net/netip"

	"github.com/google/gopacket/layers"
)

// Client is a client-side endpoint: its address and port.
func Client(port uint16) netip.AddrPort { return netip.AddrPortFrom(ClientIP, port) }

// FromClient builds a segment from client to listen:localPort as it arrives on Front.
func (e *Env) FromClient(client netip.AddrPort, localPort uint16, flags uint8, seq, ack uint32, payload []byte) Segment {
	return Segment{SrcMAC: MAC(client.Addr()), DstMAC: e.Front.MAC, Src: client, Dst: netip.AddrPortFrom(ListenIP, localPort),
		Flags: flags, Seq: seq, Ack: ack, Payload: payload, ID: 7, Window: 64240}
}

// BackendIface is the interface backends are reached on: Front one-arm, Back two-arm.
func (e *Env) BackendIface() Iface {
	if e.SNAT == BackIP {
		return e.Back
	}
	return e.Front
}

// FromBackend builds a segment from backend to SNAT:snatPort as it arrives on BackendIface.
func (e *Env) FromBackend(backend netip.AddrPort, snatPort uint16, flags uint8, seq, ack uint32, payload []byte) Segment {
	return Segment{SrcMAC: MAC(backend.Addr()), DstMAC: e.BackendIface().MAC, Src: backend, Dst: netip.AddrPortFrom(e.SNAT, snatPort),
		Flags: flags, Seq: seq, Ack: ack, Payload: payload, ID: 9, Window: 65160}
}

// ToBackend is the frame XLB should emit toward backend for seg (from the
// client), given the SNAT port: MACs of the backend hop, SNAT source, TTL-1.
func (e *Env) ToBackend(seg Segment, backend netip.AddrPort, snatPort uint16) Segment {
	out := seg
	out.SrcMAC, out.DstMAC = e.BackendIface().MAC, MAC(backend.Addr())
	out.Src, out.Dst = netip.AddrPortFrom(e.SNAT, snatPort), backend
	out.TTL = ttlOf(seg) - 1
	return out
}

// ToClient is the frame XLB should emit toward the client for seg (from the
// backend): from listen:localPort to the client, TTL-1.
func (e *Env) ToClient(seg Segment, client netip.AddrPort, localPort uint16) Segment {
	out := seg
	out.SrcMAC, out.DstMAC = e.Front.MAC, MAC(client.Addr())
	out.Src, out.Dst = netip.AddrPortFrom(ListenIP, localPort), client
	out.TTL = ttlOf(seg) - 1
	return out
}

func ttlOf(s Segment) uint8 {
	if s.TTL == 0 {
		return 64
	}
	return s.TTL
}

// timestamps is the data of s's timestamp option (TSval, TSecr), or nil.
func (s Segment) timestamps() []byte {
	for _, o := range s.Options {
		if o.OptionType == layers.TCPOptionKindTimestamps && len(o.OptionData) == 8 {
			return o.OptionData
		}
	}
	return nil
}

// HasTimestamps reports whether s carries the timestamp option.
func (s Segment) HasTimestamps() bool { return s.timestamps() != nil }

// Timestamps are s's TSval and TSecr; ok is false without the option.
func (s Segment) Timestamps() (val, ecr uint32, ok bool) {
	d := s.timestamps()
	if d == nil {
		return 0, 0, false
	}
	return binary.BigEndian.Uint32(d[:4]), binary.BigEndian.Uint32(d[4:]), true
}

// WithTimestamps is s with its timestamp option's TSval and TSecr set to
// val and ecr (every other option as it was); s unchanged when it has no
// timestamp option.
func (s Segment) WithTimestamps(val, ecr uint32) Segment {
	if s.timestamps() == nil {
		return s
	}
	opts := make([]layers.TCPOption, len(s.Options))
	copy(opts, s.Options)
	for i, o := range opts {
		if o.OptionType == layers.TCPOptionKindTimestamps && len(o.OptionData) == 8 {
			d := make([]byte, 8)
			binary.BigEndian.PutUint32(d[:4], val)
			binary.BigEndian.PutUint32(d[4:], ecr)
			opts[i].OptionData = d
			break
		}
	}
	s.Options = opts
	return s
}

// ShiftTimestamps is s as XLB rewrites it for a pair of timestamp offset
// off (bpf/tsopt.h): toward the backend its TSval plus off, toward the
// client its TSecr minus off, modulo 2^32.
func (s Segment) ShiftTimestamps(off uint32, towardBackend bool) Segment {
	val, ecr, ok := s.Timestamps()
	if !ok {
		return s
	}
	if towardBackend {
		return s.WithTimestamps(val+off, ecr)
	}
	return s.WithTimestamps(val, ecr-off)
}
