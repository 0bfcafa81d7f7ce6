package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"unsafe"

	"github.com/cilium/ebpf"
)

// LayoutVersion is the version of the pinned maps' keys and values this
// build reads and writes (bpf/layout.h XLB_LAYOUT_VERSION).
const LayoutVersion = uint32(xlbXlbPinXLB_LAYOUT_VERSION)

// The pinned metadata record, bpf/layout.h struct xlb_pin_meta.
const (
	pinMagic      = uint32(xlbXlbPinXLB_PIN_MAGIC)
	layoutVersion = LayoutVersion
	metaSize      = int(unsafe.Sizeof(xlbXlbPinMeta{}))
)

// PinMeta is what Pin records about the process that pins: its pid and
// the SHA-256 of its effective config (DESIGN §6 "a small metadata
// record").
type PinMeta struct {
	OwnerPID     uint32
	ConfigDigest [32]byte
}

// metaHead is what every version of the record starts with.
type metaHead struct {
	magic, version uint32
}

// readHead reads the magic and layout version from a record of any
// version (the first 8 bytes, forever).
func readHead(raw []byte) (metaHead, error) {
	if len(raw) < 8 {
		return metaHead{}, fmt.Errorf("a %d-byte record is too short to hold a magic and a layout version", len(raw))
	}
	return metaHead{magic: binary.NativeEndian.Uint32(raw), version: binary.NativeEndian.Uint32(raw[4:])}, nil
}

// decodeMeta reads a record of this build's layout.
func decodeMeta(raw []byte) (xlbXlbPinMeta, error) {
	var m xlbXlbPinMeta
	h, err := readHead(raw)
	if err != nil {
		return m, err
	}
	if h.magic != pinMagic {
		return m, fmt.Errorf("magic %#x is not XLB's %#x", h.magic, pinMagic)
	}
	if h.version != layoutVersion || len(raw) != metaSize {
		return m, fmt.Errorf("a %d-byte record of layout %d, this build reads %d-byte records of layout %d", len(raw), h.version, metaSize, layoutVersion)
	}
	copy((*[metaSize]byte)(unsafe.Pointer(&m))[:], raw)
	return m, nil
}

// readMetaRaw reads the single entry of a meta map as bytes.
func readMetaRaw(m *ebpf.Map) ([]byte, error) {
	if m.Type() != ebpf.Array || m.KeySize() != 4 || m.MaxEntries() != 1 {
		return nil, fmt.Errorf("not a one-entry array map (%s, key %d bytes, %d entries)", m.Type(), m.KeySize(), m.MaxEntries())
	}
	var raw []byte
	if err := m.Lookup(uint32(0), &raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// metaMapLocked is the record HotUpgrades and CountHotUpgrade work on: the
// pinned one when there is one (shared by a process and its successor,
// which never count at the same time), else this process's own. release
// closes what it opened. Callers hold d.mu.
func (d *Dataplane) metaMapLocked() (m *ebpf.Map, release func(), err error) {
	if d.stateDir == "" {
		return d.objs.XlbMeta, func() {}, nil
	}
	p, err := ebpf.LoadPinnedMap(metaPath(d.stateDir), nil)
	if errors.Is(err, os.ErrNotExist) {
		return d.objs.XlbMeta, func() {}, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("dataplane: open %s: %w", metaPath(d.stateDir), err)
	}
	return p, func() { p.Close() }, nil
}

// HotUpgrades returns the hand-offs counted in the pinned metadata
// record (CountHotUpgrade): completed and failed, since the first pin
// under state_dir. Without pins, this process's own record.
func (d *Dataplane) HotUpgrades() (ok, failed uint64, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	m, release, err := d.metaMapLocked()
	if err != nil {
		return 0, 0, err
	}
	defer release()
	rec, err := readMetaRecord(m)
	if err != nil {
		return 0, 0, err
	}
	return rec.HotUpgradesOk, rec.HotUpgradesFailed, nil
}

// CountHotUpgrade adds one completed (ok) or failed hand-off to the pinned
// metadata record (read, modify, write: the old and the new process never
// count at the same time). Without pins, to this process's own record.
func (d *Dataplane) CountHotUpgrade(ok bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	m, release, err := d.metaMapLocked()
	if err != nil {
		return err
	}
	defer release()
	rec, err := readMetaRecord(m)
	if err != nil {
		return err
	}
	if ok {
		rec.HotUpgradesOk++
	} else {
		rec.HotUpgradesFailed++
	}
	if err := m.Update(uint32(0), &rec, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("dataplane: write the pin metadata: %w", err)
	}
	return nil
}

// readMetaRecord reads a record of this build's layout; a record never
// written (all zero) reads as a new one.
func readMetaRecord(m *ebpf.Map) (xlbXlbPinMeta, error) {
	raw, err := readMetaRaw(m)
	if err != nil {
		return xlbXlbPinMeta{}, fmt.Errorf("dataplane: read the pin metadata: %w", err)
	}
	if h, _ := readHead(raw); h.magic == 0 && len(raw) == metaSize {
		return xlbXlbPinMeta{Magic: pinMagic, LayoutVersion: layoutVersion}, nil
	}
	rec, err := decodeMeta(raw)
	if err != nil {
		return rec, fmt.Errorf("dataplane: read the pin metadata: %w", err)
	}
	return rec, nil
}
