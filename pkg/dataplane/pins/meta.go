package pins

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/cilium/ebpf"
)

// The pinned metadata record, bpf/layout.h struct xlb_pin_meta.
const (
	pinMagic      = uint32(xlbXlbPinXLB_PIN_MAGIC)
	LayoutVersion = uint32(xlbXlbPinXLB_LAYOUT_VERSION)
	metaSize      = int(unsafe.Sizeof(xlbXlbPinMeta{}))
)

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
	if h.version != LayoutVersion || len(raw) != metaSize {
		return m, fmt.Errorf("a %d-byte record of layout %d, this build reads %d-byte records of layout %d", len(raw), h.version, metaSize, LayoutVersion)
	}
	copy((*[metaSize]byte)(unsafe.Pointer(&m))[:], raw)
	return m, nil
}

// ReadMetaRaw reads the single entry of a meta map as bytes.
func ReadMetaRaw(m *ebpf.Map) ([]byte, error) {
	if m.Type() != ebpf.Array || m.KeySize() != 4 || m.MaxEntries() != 1 {
		return nil, fmt.Errorf("not a one-entry array map (%s, key %d bytes, %d entries)", m.Type(), m.KeySize(), m.MaxEntries())
	}
	var raw []byte
	if err := m.Lookup(uint32(0), &raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// ReadMetaRecord reads a record of this build's layout; a record never
// written (all zero) reads as a new one.
func ReadMetaRecord(m *ebpf.Map) (Meta, error) {
	raw, err := ReadMetaRaw(m)
	if err != nil {
		return xlbXlbPinMeta{}, fmt.Errorf("dataplane: read the pin metadata: %w", err)
	}
	if h, _ := readHead(raw); h.magic == 0 && len(raw) == metaSize {
		return xlbXlbPinMeta{Magic: pinMagic, LayoutVersion: LayoutVersion}, nil
	}
	rec, err := decodeMeta(raw)
	if err != nil {
		return rec, fmt.Errorf("dataplane: read the pin metadata: %w", err)
	}
	return rec, nil
}
