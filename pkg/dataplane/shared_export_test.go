package dataplane

import "github.com/cilium/ebpf"

// FixtureSharedMaps returns, by name, every map of the data path whose
// cells all CPUs share: every map but the per-CPU ones, and but the flow
// table, whose entries belong each to one pair. A packet that writes one
// of them writes a cache line other CPUs' packets read or write (issue 17
// item 4).
func (d *Dataplane) FixtureSharedMaps() map[string]*ebpf.Map {
	out := map[string]*ebpf.Map{}
	for name, m := range d.mapsByName() {
		switch {
		case name == xlbMapXlbFlows:
		case m.Type() == ebpf.PerCPUArray || m.Type() == ebpf.PerCPUHash:
		default:
			out[name] = m
		}
	}
	return out
}

// FixtureGiveIfMACSlot hands interface ifindex's slot of xlb_if_mac_slots
// to another interface, other, whose address is mac (as ifmacs.go does
// when other's address was recorded first): ifindex's address is then
// read from xlb_if_macs alone.
func (d *Dataplane) FixtureGiveIfMACSlot(ifindex, other int, mac [6]byte) error {
	s := xlbIfMacSlot{Ifindex: uint32(other), Addr: mac}
	return d.objs.XlbIfMacSlots.Update(ifMACSlot(ifindex), &s, ebpf.UpdateExist)
}

// FixtureBeforeNextHopFree makes FreeNextHops call f after it has read the
// slots and decided which to free, before it frees them: a test runs there
// what a CPU could do in that window (a SYN naming a slot). nil removes it.
func (d *Dataplane) FixtureBeforeNextHopFree(f func()) { d.beforeNextHopFree = f }
