package dptest

import "net/netip"

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
