// Package pins is the state a running XLB leaves under state_dir and a
// successor takes over (DESIGN §6): the layout of state_dir (bpffs.go),
// the pinned metadata record (meta.go), reading a predecessor's pins
// (pins.go), maps as raw bytes (rawmap.go), and the migration that copies
// pins of an older layout, or of another flow table size, into this
// build's maps (migrate.go) through one step per layout version
// (layout2.go to layout8.go: the step from that layout to the next).
//
// It knows the pinned structs from bpf/layout.h through
// xlb_types_gen.go, bpf2go's declarations of the same BPF object
// (internal/gentypes), and none of the data path's code: pkg/dataplane
// loads the program, pins what it holds, and asks this package to read
// and migrate (adopt.go, pin.go). A new layout version adds a file
// layoutN.go with the step from N (and its test), and its entry in
// layoutSteps (migrate.go).
package pins
