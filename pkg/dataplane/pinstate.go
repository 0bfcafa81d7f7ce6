package dataplane

import (
	"errors"

	"github.com/cilium/ebpf"

	"github.com/xlbproject/xlb/pkg/dataplane/pins"
)

// Pinned state (the layout of state_dir, reading a predecessor's pins, the
// migration between layouts, maps as raw bytes) is pkg/dataplane/pins'.
// These are its names as this package's files use them.

// errClosed: the data path was closed or released.
var errClosed = errors.New("dataplane: closed or released")

type (
	pinnedState   = pins.State
	migration     = pins.Migration
	migrationHost = pins.Host
	neighbour     = pins.Neighbour
	rawEntries    = pins.RawEntries
)

const (
	metaFile   = pins.MetaFile
	mapsDir    = pins.MapsDir
	linksDir   = pins.LinksDir
	stagingDir = pins.StagingDir
	retiredDir = pins.RetiredDir
	rawChunk   = pins.RawChunk
)

var (
	readPins       = pins.Read
	probePinning   = pins.ProbePinning
	metaPath       = pins.MetaPath
	mapPath        = pins.MapPath
	linkPath       = pins.LinkPath
	ifnameOfLink   = pins.IfnameOfLink
	readMetaRecord = pins.ReadMetaRecord
	newMigration   = pins.NewMigration
	currentLayout  = pins.CurrentLayout
	mapCPUs        = pins.MapCPUs
	newRawEntries  = pins.NewRawEntries
	writeEntries   = pins.WriteEntries
)

// EnsureBPFFS makes stateDir a directory (mode 0700) on a BPF filesystem,
// mounting a bpffs on its parent when that is not on one, and reports
// mounted (pins.EnsureBPFFS).
func EnsureBPFFS(stateDir string) (mounted bool, err error) { return pins.EnsureBPFFS(stateDir) }

// toBytes is v as the kernel holds it.
func toBytes[T any](v *T) []byte { return pins.ToBytes(v) }

// claimNextHopOf is claimNextHop for the migration (migrationHost), whose
// struct nexthop is pins' declaration of it.
func claimNextHopOf(m *ebpf.Map, want pins.NextHop) (uint32, error) {
	h, err := pins.FromBytes[xlbNexthop](pins.ToBytes(&want))
	if err != nil {
		return 0, err
	}
	return claimNextHop(m, h)
}
