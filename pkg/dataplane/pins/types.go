package pins

// The structs of the current layout that this package's API carries, as
// bpf/layout.h declares them (xlb_types_gen.go). pkg/dataplane has its own
// declarations of the same structs (bpf2go's, of the same object): Go
// counts them as other types, so a value crosses as bytes (ToBytes,
// FromBytes).
type (
	// Meta is the pinned metadata record, struct xlb_pin_meta.
	Meta = xlbXlbPinMeta
	// FlowKey is struct flow_key.
	FlowKey = xlbFlowKey
	// FlowValue is struct flow_value.
	FlowValue = xlbFlowValue
	// NextHop is struct nexthop, a slot of xlb_nexthops.
	NextHop = xlbNexthop
	// PortMap is struct port_map (Config8's ports).
	PortMap = xlbPortMap
	// SNATRetired is struct snat_retired (Config8's retired spaces).
	SNATRetired = xlbSnatRetired
)
