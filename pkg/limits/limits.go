// Package limits holds the sizes and defaults that the config, the data
// path and the maintenance loop share, each written once, so that
// pkg/config can check a file against them without importing the data
// path (docs/ARCHITECTURE.md). It imports nothing of the module.
//
// layout_gen.go is generated from bpf/layout.h's enum xlb_limits: one
// untyped constant per enumerator, its value read from the BTF of the
// compiled BPF object by internal/genlimits (`make generate`; `make
// check-generated` fails when it is stale). A size the data path is built
// with changes in bpf/layout.h only. This file holds what is not a size of
// the data path: the time defaults of the maintenance loop and the names
// of the XDP attach modes.
package limits

import "time"

// The maintenance loop's defaults, which config fills in for an omitted
// field.
const (
	// DefaultOrphanTTL is orphan_ttl_secs' default (DESIGN §1, seed
	// "Inactive connection cleanup").
	DefaultOrphanTTL = 300 * time.Second
	// DefaultEmbryonicTTL is flow_table.embryonic_ttl_secs' default
	// (DESIGN §6b, issue 13).
	DefaultEmbryonicTTL = 10 * time.Second
)

// The XDP attach modes (xdp_mode; pkg/dataplane's Mode).
const (
	XDPModeAuto    = "auto"    // native, falling back to generic
	XDPModeNative  = "native"  // driver mode only
	XDPModeGeneric = "generic" // SKB mode only
)
