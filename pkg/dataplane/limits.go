package dataplane

import "github.com/xlbproject/xlb/pkg/limits"

// The data path's sizes, as bpf/layout.h enum xlb_limits declares them and
// internal/genlimits writes them into pkg/limits; Go never spells them
// again. Each is typed here for what it counts.
const (
	// MaxBackends is the number of backend ids (0..MaxBackends-1) and the
	// largest routable set the data path accepts.
	MaxBackends = uint32(limits.MaxBackends)
	// MaxPorts is the number of port mappings per listen address (DESIGN §1).
	MaxPorts = int(limits.MaxPorts)
	// MaxServices is the number of services, serving and draining
	// together, the data path can hold (DESIGN §9).
	MaxServices = int(limits.MaxServices)
	// MaxMembers is the number of (service, backend address) members,
	// the backends of all services together: the per-backend counter
	// cells.
	MaxMembers = int(limits.MaxMembers)
	// ServiceNameLen is the longest service name, in bytes.
	ServiceNameLen = int(limits.ServiceNameLen)
	// MaxInterfaces is the number of egress interfaces the redirect map
	// holds: the interfaces one instance attaches to.
	MaxInterfaces = int(limits.MaxInterfaces)
	// DefaultMaxConnections is the connection pairs the flow map holds
	// unless flow_table.max_connections says otherwise (EntriesPerPair
	// entries each).
	DefaultMaxConnections = uint32(limits.DefaultMaxConnections)
	// EntriesPerPair is the flow entries of one connection pair: one per
	// direction (Direction), so the flow map holds EntriesPerPair times
	// Options.MaxConnections entries.
	EntriesPerPair = uint32(limits.EntriesPerPair)
	// XDPActions is the number of XDP verdicts (the kernel's enum
	// xdp_action: aborted, drop, pass, tx, redirect), the length of
	// Counters.Actions.
	XDPActions = int(limits.XDPActions)
	// LoneCheckTicks is how long an entry must have been idle for a packet
	// on it to check its counterpart (CloseLone).
	LoneCheckTicks = Jiffies(limits.LoneCheckTicks)
	// CloseQueueSlots is the per-CPU close queue's length (the ring buffer
	// fallback): a CPU that posts more events than this between two drains
	// overwrites its oldest ones.
	CloseQueueSlots = uint64(limits.CloseQueueSlots)
	// ReapBatch is how many requests one run of the reaper takes.
	ReapBatch = int(limits.ReapBatch)
	// MaxSNATAddrs is the number of SNAT addresses (snat.ip) one instance
	// may use; each multiplies the ports available toward every backend.
	MaxSNATAddrs = int(limits.MaxSNATIPs)
	// MaxRetiredSNAT is the number of retired SNAT spaces (RetiredSNAT) the
	// config holds: SNAT addresses that earlier configs used and that live
	// pairs may still hold ports of, with the port ranges they used.
	MaxRetiredSNAT = int(limits.MaxSNATRetired)
	// PickTries is how many routable backends a SYN tries when SNAT ports
	// run out (Counters.SNATFallbacks).
	PickTries = int(limits.PickTries)
	// MaxNextHops is the number of next-hop slots (bpf/layout.h struct
	// nexthop), a power of two.
	MaxNextHops = uint32(limits.MaxNextHops)
	// NextHopProbes is how many slots from a next hop's hash the data
	// path probes for it (NextHopSlots).
	NextHopProbes = int(limits.NextHopProbes)
	// WScaleNone and WScaleUnknown are FlowValue.Wscale's two non-shift
	// values: the sender's SYN had no window scale option; the pair was
	// migrated from a layout that did not track windows (any RST goes).
	WScaleNone    = uint8(limits.WScaleNone)
	WScaleUnknown = uint8(limits.WScaleUnknown)

	// HandshakeBounds is the number of upper bounds of the handshake
	// histogram (HandshakeBuckets); Histogram.Buckets has one more
	// bucket, above the last bound.
	HandshakeBounds = int(limits.HSBounds)

	// dirs is the number of flow directions (Direction): the cells per
	// backend id in the per-backend traffic map.
	dirs = int(limits.Dirs)
)
