package dataplane

import (
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
)

// LayoutVersion is the version of the pinned maps' keys and values this
// build reads and writes (bpf/layout.h XLB_LAYOUT_VERSION).
const LayoutVersion = uint32(xlbXlbPinXLB_LAYOUT_VERSION)

// The pinned metadata record, bpf/layout.h struct xlb_pin_meta (read and
// decoded by pkg/dataplane/pins).
const (
	pinMagic      = uint32(xlbXlbPinXLB_PIN_MAGIC)
	layoutVersion = LayoutVersion
)

// PinMeta is what Pin records about the process that pins: its pid and
// the SHA-256 of its effective config (DESIGN §6 "a small metadata
// record").
type PinMeta struct {
	OwnerPID     uint32
	ConfigDigest [32]byte
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
