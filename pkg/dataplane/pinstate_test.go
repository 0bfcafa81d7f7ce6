package dataplane

import "github.com/xlbproject/xlb/pkg/dataplane/pins"

// The names of pkg/dataplane/pins that this package's tests use: the older
// layouts' structs, to write pins of them, and the migration's own.
type (
	layout         = pins.Layout
	layoutStep     = pins.Step
	entryConverter = pins.Converter
	flowValue2     = pins.FlowValue2
	config2        = pins.Config2
	backendRef3    = pins.BackendRef3
	backendSet3    = pins.BackendSet3
	flowValue6     = pins.FlowValue6
	flowValue7     = pins.FlowValue7
	config8        = pins.Config8
	backendRef8    = pins.BackendRef8
	backendSet8    = pins.BackendSet8
	state8         = pins.State8
)

const (
	flowValueSize  = pins.FlowValueSize
	flowValue3Size = pins.FlowValue3Size
	flowValue6Size = pins.FlowValue6Size
	flowValue7Size = pins.FlowValue7Size
	config5Size    = pins.Config5Size
	config8Size    = pins.Config8Size
)

var (
	asFlowValue6 = pins.AsFlowValue6
	dumpMap      = pins.DumpMap
	readMetaRaw  = pins.ReadMetaRaw
)

// fromBytes reads a T laid out as the kernel holds it from b, which must
// be exactly its size.
func fromBytes[T any](b []byte) (T, error) { return pins.FromBytes[T](b) }

// asFlowValue7 is v as layout 7 held it.
func asFlowValue7(v FlowValue) flowValue7 {
	p, err := pins.FromBytes[pins.FlowValue](toBytes(&v))
	if err != nil {
		panic(err)
	}
	return pins.AsFlowValue7(p)
}

// decodeFlowValue reads the struct flow_value at the start of raw.
func decodeFlowValue(raw []byte, v *FlowValue) {
	*v, _ = fromBytes[FlowValue](raw[:flowValueSize])
}
