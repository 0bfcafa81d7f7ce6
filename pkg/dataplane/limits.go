package dataplane

// The data path's sizes, as bpf/layout.h enum xlb_limits declares them and
// bpf2go generates them; Go never spells them again. Each is typed for
// what it counts.
const (
	// MaxBackends is the number of backend ids (0..MaxBackends-1) and the
	// largest routable set the data path accepts.
	MaxBackends = uint32(xlbXlbLimitsXLB_MAX_BACKENDS)
	// MaxPorts is the number of port mappings per listen address (DESIGN §1).
	MaxPorts = int(xlbXlbLimitsXLB_MAX_PORTS)
	// MaxServices is the number of services, serving and draining
	// together, the data path can hold (DESIGN §9).
	MaxServices = int(xlbXlbLimitsXLB_MAX_SERVICES)
	// MaxMembers is the number of (service, backend address) members,
	// the backends of all services together: the per-backend counter
	// cells.
	MaxMembers = int(xlbXlbLimitsXLB_MAX_MEMBERS)
	// ServiceNameLen is the longest service name, in bytes.
	ServiceNameLen = int(xlbXlbLimitsXLB_SERVICE_NAME_LEN)
	// MaxInterfaces is the number of egress interfaces the redirect map
	// holds: the interfaces one instance attaches to.
	MaxInterfaces = int(xlbXlbLimitsXLB_MAX_INTERFACES)
	// DefaultMaxConnections is the connection pairs the flow map holds
	// unless flow_table.max_connections says otherwise (EntriesPerPair
	// entries each).
	DefaultMaxConnections = uint32(xlbXlbLimitsXLB_DEFAULT_MAX_CONNECTIONS)
	// EntriesPerPair is the flow entries of one connection pair: one per
	// direction (Direction), so the flow map holds EntriesPerPair times
	// Options.MaxConnections entries.
	EntriesPerPair = uint32(xlbXlbLimitsXLB_ENTRIES_PER_PAIR)
	// XDPActions is the number of XDP verdicts (the kernel's enum
	// xdp_action: aborted, drop, pass, tx, redirect), the length of
	// Counters.Actions.
	XDPActions = int(xlbXlbLimitsXLB_XDP_ACTIONS)
	// LoneCheckTicks is how long an entry must have been idle for a packet
	// on it to check its counterpart (CloseLone).
	LoneCheckTicks = Jiffies(xlbXlbLimitsXLB_LONE_CHECK_TICKS)
	// CloseQueueSlots is the per-CPU close queue's length (the ring buffer
	// fallback): a CPU that posts more events than this between two drains
	// overwrites its oldest ones.
	CloseQueueSlots = uint64(xlbXlbLimitsXLB_CLOSE_QUEUE_SLOTS)
	// ReapBatch is how many requests one run of the reaper takes.
	ReapBatch = int(xlbXlbLimitsXLB_REAP_BATCH)
	// MaxSNATAddrs is the number of SNAT addresses (snat.ip) one instance
	// may use; each multiplies the ports available toward every backend.
	MaxSNATAddrs = int(xlbXlbLimitsXLB_MAX_SNAT_IPS)
	// MaxRetiredSNAT is the number of retired SNAT spaces (RetiredSNAT) the
	// config holds: SNAT addresses that earlier configs used and that live
	// pairs may still hold ports of, with the port ranges they used.
	MaxRetiredSNAT = int(xlbXlbLimitsXLB_MAX_SNAT_RETIRED)
	// PickTries is how many routable backends a SYN tries when SNAT ports
	// run out (Counters.SNATFallbacks).
	PickTries = int(xlbXlbLimitsXLB_PICK_TRIES)
	// MaxNextHops is the number of next-hop slots (bpf/layout.h struct
	// nexthop), a power of two.
	MaxNextHops = uint32(xlbXlbLimitsXLB_MAX_NEXTHOPS)
	// NextHopProbes is how many slots from a next hop's hash the data
	// path probes for it (NextHopSlots).
	NextHopProbes = int(xlbXlbLimitsXLB_NEXTHOP_PROBES)
	// WScaleNone and WScaleUnknown are FlowValue.Wscale's two non-shift
	// values: the sender's SYN had no window scale option; the pair was
	// migrated from a layout that did not track windows (any RST goes).
	WScaleNone    = uint8(xlbXlbLimitsXLB_WSCALE_NONE)
	WScaleUnknown = uint8(xlbXlbLimitsXLB_WSCALE_UNKNOWN)

	// HandshakeBounds is the number of upper bounds of the handshake
	// histogram (HandshakeBuckets); Histogram.Buckets has one more
	// bucket, above the last bound.
	HandshakeBounds = int(xlbXlbLimitsXLB_HS_BOUNDS)

	// dirs is the number of flow directions (Direction): the cells per
	// backend id in the per-backend traffic map.
	dirs = int(xlbXlbLimitsXLB_DIRS)
)
