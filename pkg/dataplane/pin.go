package dataplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Pin writes or replaces the pins under state_dir: every stateful map,
// the bpf_link of every interface attached through one, then the
// metadata record (layout version, max_connections, m, the network
// namespace cookie of Options.NetnsCookie, and the hand-off counts of the
// record it replaces). The daemon calls it once everything is loaded, attached and
// published (DESIGN §6: pins are written only after a complete start).
//
// Before pinning, the links pinned for interfaces this process did not
// attach (gone from the config) are detached and unpinned, and after a
// migration the flow map and counters are copied a second time from the
// predecessor's maps (its program ran on them until Attach replaced it).
// Replaced map pins are removed only once the new set is complete; if the
// replacement fails, the previous pins are put back and the error says so.
// Without a state_dir (or with pinning unavailable) Pin does nothing;
// after Close or Release it is an error.
func (d *Dataplane) Pin(m PinMeta) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.done {
		return errClosed
	}
	if d.stateDir == "" {
		return nil
	}
	return d.pinLocked(m)
}

func (d *Dataplane) pinLocked(pm PinMeta) error {
	if err := d.dropForeignLinksLocked(); err != nil {
		return err
	}
	if d.migration != nil {
		if err := d.migration.CatchUp(); err != nil {
			return fmt.Errorf("dataplane: migrate: %w; the previous pins are unchanged", err)
		}
	}
	if err := d.writeMetaLocked(pm); err != nil {
		return err
	}
	if err := d.replacePinsLocked(); err != nil {
		return err
	}
	d.pinned, d.lastPin = true, pm
	if d.migration != nil {
		d.migration.Close()
		d.migration = nil
	}
	return nil
}

// writeMetaLocked writes this process's record into its meta map, keeping
// the hand-off counts of the record pinned now.
func (d *Dataplane) writeMetaLocked(pm PinMeta) error {
	rec := xlbXlbPinMeta{Magic: pinMagic, LayoutVersion: layoutVersion, MaxConnections: d.maxConnections,
		OwnerPid: pm.OwnerPID, NetnsCookie: d.netnsCookie, ConfigDigest: pm.ConfigDigest,
		HotUpgradesOk: d.prevCounts[0], HotUpgradesFailed: d.prevCounts[1]}
	prev, release, err := d.metaMapLocked()
	if err != nil {
		return err
	}
	// The counts as they are now; a record of another layout (migrated
	// from) keeps the counts it had when Load read it.
	if old, err := readMetaRecord(prev); err == nil {
		rec.HotUpgradesOk, rec.HotUpgradesFailed = old.HotUpgradesOk, old.HotUpgradesFailed
	}
	release()
	if err := d.objs.XlbMeta.Update(uint32(0), &rec, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("dataplane: write the pin metadata: %w", err)
	}
	return nil
}

// pinnedMaps are the maps Pin pins, by name: every map of the object but
// the per-CPU scratch space, the reaper's request slot (both rewritten
// before every use), the interfaces' MACs (written at every attach:
// ifmacs.go), the metadata record (pinned as meta) and the program's
// constants.
func (d *Dataplane) pinnedMaps() map[string]*ebpf.Map {
	out := d.mapsByName()
	for _, name := range unpinnedMaps {
		delete(out, name)
	}
	return out
}

// mapsByName is every map of the loaded object by its name in the ELF.
func (d *Dataplane) mapsByName() map[string]*ebpf.Map {
	m := d.objs.xlbMaps
	return map[string]*ebpf.Map{
		xlbMapXlbBackendSets: m.XlbBackendSets, xlbMapXlbBackendStats: m.XlbBackendStats, xlbMapXlbCfg: m.XlbCfg,
		xlbMapXlbCloseHead: m.XlbCloseHead, xlbMapXlbCloseQueue: m.XlbCloseQueue, xlbMapXlbCloseRing: m.XlbCloseRing,
		xlbMapXlbCounters: m.XlbCounters, xlbMapXlbFlows: m.XlbFlows, xlbMapXlbMeta: m.XlbMeta,
		xlbMapXlbPairEvents: m.XlbPairEvents, xlbMapXlbReapBatch: m.XlbReapBatch, xlbMapXlbReaped: m.XlbReaped,
		xlbMapXlbScratch: m.XlbScratch, xlbMapXlbShared: m.XlbShared, xlbMapXlbSnatCursors: m.XlbSnatCursors,
		xlbMapXlbTxPorts: m.XlbTxPorts, xlbMapXlbNexthops: m.XlbNexthops, xlbMapXlbSnatPorts: m.XlbSnatPorts,
		xlbMapXlbHandshake: m.XlbHandshake, xlbMapXlbIfMacs: m.XlbIfMacs, xlbMapXlbIfMacSlots: m.XlbIfMacSlots,
		xlbMapXlbFrags:         m.XlbFrags,
		xlbMapXlbSnatSyncBatch: m.XlbSnatSyncBatch,
		xlbMapXlbNexthopBatch:  m.XlbNexthopBatch,
		xlbMapXlbBackendTs:     m.XlbBackendTs,
		xlbMapXlbSnatTsreuse:   m.XlbSnatTsreuse,
		xlbMapXlbSnatTsreuseN:  m.XlbSnatTsreuseN,
		xlbMapXlbServices:      m.XlbServices,
		xlbMapXlbListen:        m.XlbListen,
		xlbMapXlbRr:            m.XlbRr,
		xlbMapXlbSched:         m.XlbSched,
		xlbMapXlbSchedInfo:     m.XlbSchedInfo,
		xlbMapXlbUdpUnreplied:  m.XlbUdpUnreplied,
		xlbMapXlbSvcCounters:   m.XlbSvcCounters,
	}
}

// pinner pins one object at a path; holds reports whether the pin at a
// path is that object already.
type pinner struct {
	pin   func(path string) error
	holds func(path string) bool
}

func mapPinner(m *ebpf.Map) pinner {
	return pinner{
		pin: func(p string) error {
			c, err := m.Clone() // a pin of its own, whatever m's
			if err != nil {
				return err
			}
			defer c.Close()
			return c.Pin(p)
		},
		holds: func(p string) bool {
			pm, err := ebpf.LoadPinnedMap(p, nil)
			if err != nil {
				return false
			}
			defer pm.Close()
			return sameMap(pm, m)
		},
	}
}

func linkPinner(l link.Link) pinner {
	return pinner{
		pin: func(p string) error {
			c, err := dupLink(l) // a pin of its own, whatever l's
			if err != nil {
				return err
			}
			defer c.Close()
			return c.Pin(p)
		},
		holds: func(p string) bool {
			pl, err := link.LoadPinnedLink(p, nil)
			if err != nil {
				return false
			}
			defer pl.Close()
			return linkID(pl) == linkID(l)
		},
	}
}

// dupLink opens l a second time from a duplicate of its descriptor (not
// by id: BPF_LINK_GET_FD_BY_ID needs CAP_SYS_ADMIN, which the unit does
// not grant).
func dupLink(l link.Link) (link.Link, error) {
	f, ok := l.(interface{ FD() int })
	if !ok {
		return nil, fmt.Errorf("a %T has no file descriptor", l)
	}
	fd, err := unix.FcntlInt(uintptr(f.FD()), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("duplicate the link's descriptor: %w", err)
	}
	return link.NewFromFD(fd)
}

// linkID is l's kernel id (0 when the kernel does not say).
func linkID(l link.Link) link.ID {
	if info, err := l.Info(); err == nil {
		return info.ID
	}
	return 0
}

// replacePinsLocked pins every map, every bpf_link and meta whose pin does
// not hold that very object yet, through staging/ (see the top of this
// file): a crash leaves either the previous set or the new one, never a
// mix, and never links without their maps and record.
func (d *Dataplane) replacePinsLocked() error {
	want := map[string]pinner{metaFile: mapPinner(d.objs.XlbMeta)}
	for name, m := range d.pinnedMaps() {
		want[filepath.Join(mapsDir, name)] = mapPinner(m)
	}
	for _, a := range d.attached {
		if a.link != nil {
			rel, _ := filepath.Rel(d.stateDir, linkPath(d.stateDir, a.Interface))
			want[rel] = linkPinner(a.link)
		}
	}
	var stale []string
	for rel, p := range want {
		if !p.holds(filepath.Join(d.stateDir, rel)) {
			stale = append(stale, rel)
		}
	}
	if len(stale) > 0 {
		// meta last: the commit mark of the staging and of the swap.
		stale = slices.DeleteFunc(stale, func(s string) bool { return s == metaFile })
		slices.Sort(stale)
		stale = append(stale, metaFile)
		if err := stagePins(d.stateDir, stale, want); err != nil {
			os.RemoveAll(filepath.Join(d.stateDir, stagingDir))
			return fmt.Errorf("dataplane: state_dir %s: stage the new pins: %w; the previous pins are unchanged", d.stateDir, err)
		}
		if err := swapStaged(d.stateDir, stale); err != nil {
			return err
		}
	}
	for _, a := range d.attached {
		a.pinned = a.link != nil
	}
	return d.dropOtherMapPinsLocked(want)
}

// dropOtherMapPinsLocked removes the pins under maps/ of maps this build
// does not have (a migration from a layout that had them).
func (d *Dataplane) dropOtherMapPinsLocked(want map[string]pinner) error {
	entries, err := os.ReadDir(filepath.Join(d.stateDir, mapsDir))
	if err != nil {
		return fmt.Errorf("dataplane: state_dir %s: %w", d.stateDir, err)
	}
	var errs []error
	for _, e := range entries {
		if _, ok := want[filepath.Join(mapsDir, e.Name())]; !ok {
			errs = append(errs, os.Remove(mapPath(d.stateDir, e.Name())))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("dataplane: state_dir %s: remove the pins of maps this build has not: %w", d.stateDir, err)
	}
	return nil
}

func sameMap(a, b *ebpf.Map) bool {
	ia, err1 := a.Info()
	ib, err2 := b.Info()
	if err1 != nil || err2 != nil {
		return false
	}
	x, ok1 := ia.ID()
	y, ok2 := ib.ID()
	return ok1 && ok2 && x == y
}

// stagePins pins want[rel] at staging/rel for each rel, in order (meta last).
func stagePins(dir string, rels []string, want map[string]pinner) error {
	staging := filepath.Join(dir, stagingDir)
	if err := os.RemoveAll(staging); err != nil {
		return err
	}
	for _, rel := range rels {
		p := filepath.Join(staging, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		if err := want[rel].pin(p); err != nil {
			return fmt.Errorf("pin %s: %w", rel, err)
		}
	}
	return nil
}

// swapStaged renames each staged pin into place (meta last), moving what
// it replaces to retired/, then removes retired/. On a failure it moves
// everything back.
func swapStaged(dir string, rels []string) error {
	type moved struct {
		rel     string
		retired bool
	}
	var done []moved
	undo := func(cause error) error {
		var errs []error
		for _, m := range slices.Backward(done) {
			final := filepath.Join(dir, m.rel)
			if m.retired {
				errs = append(errs, os.Rename(filepath.Join(dir, retiredDir, m.rel), final))
			} else {
				errs = append(errs, os.Remove(final))
			}
		}
		errs = append(errs, os.RemoveAll(filepath.Join(dir, stagingDir)))
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("dataplane: state_dir %s: replace the pins: %w; restoring the previous pins failed too: %v", dir, cause, err)
		}
		return fmt.Errorf("dataplane: state_dir %s: replace the pins: %w; the previous pins are restored", dir, cause)
	}
	for _, rel := range rels {
		final := filepath.Join(dir, rel)
		m := moved{rel: rel}
		if _, err := os.Lstat(final); err == nil {
			retired := filepath.Join(dir, retiredDir, rel)
			if err := os.MkdirAll(filepath.Dir(retired), 0o700); err != nil {
				return undo(err)
			}
			if err := os.Rename(final, retired); err != nil {
				return undo(err)
			}
			m.retired = true
		}
		if err := os.MkdirAll(filepath.Dir(final), 0o700); err != nil {
			return undo(err)
		}
		if err := os.Rename(filepath.Join(dir, stagingDir, rel), final); err != nil {
			if m.retired {
				done = append(done, m)
			}
			return undo(err)
		}
		done = append(done, m)
	}
	return errors.Join(os.RemoveAll(filepath.Join(dir, retiredDir)), os.RemoveAll(filepath.Join(dir, stagingDir)))
}

// removePin removes a pin; one that is gone already is no error.
func removePin(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
