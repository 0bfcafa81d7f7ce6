package pins

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	"github.com/cilium/ebpf"
)

// Pinned state under state_dir (DESIGN §6):
//
//	meta          the metadata record (struct xlb_pin_meta)
//	maps/<name>   every stateful map (all but pkg/dataplane adopt.go's unpinnedMaps
//	              and the program's constants)
//	links/<ifname> the XDP bpf_link of each interface (bpf_link path only;
//	              a program attached through netlink stays attached anyway)
//
// Every pin that changes (all of them on the first Pin; the flow map and
// meta after a max_connections migration; a new interface's link) is
// staged: the complete new set is pinned under staging/ with meta last,
// then each pin is renamed into place (the one it replaces moved to
// retired/), meta last, and retired/ removed. A start that finds a
// staging/ holding meta finishes the interrupted replacement; a staging/
// without meta was never complete and is dropped (its links, pinned
// nowhere else, go with it), the previous pins intact. So a crash never
// leaves a mix of two sets, nor links without their maps and record.

// State is what a start found under state_dir.
type State struct {
	Dir  string
	Meta Meta
	Maps map[string]*ebpf.Map // maps/<name>, opened
}

// Close releases every map still held.
func (p *State) Close() {
	for _, m := range p.Maps {
		m.Close()
	}
	p.Maps = nil
}

// Take hands the map name over to the caller (who closes it).
func (p *State) Take(name string) *ebpf.Map {
	m := p.Maps[name]
	delete(p.Maps, name)
	return m
}

// Read reads state_dir: nil when nothing is pinned. It refuses pins
// it cannot take over (an unreadable or foreign record, a future layout,
// another network namespace), naming state_dir, what it found and what
// the operator can do; the pins are left as they are.
func Read(dir string, cookie uint64) (*State, error) {
	if err := finishReplacement(dir); err != nil {
		return nil, fmt.Errorf("dataplane: state_dir %s: finish the pin replacement a previous xlb was interrupted in: %w", dir, err)
	}
	mm, err := ebpf.LoadPinnedMap(MetaPath(dir), nil)
	if errors.Is(err, os.ErrNotExist) {
		if left := pinnedNames(dir); len(left) > 0 {
			return nil, fmt.Errorf("dataplane: state_dir %s holds pins (%s) but no metadata record (%s): not a complete set xlb wrote; if no xlb uses it, remove %s and start again", dir, strings.Join(left, ", "), MetaPath(dir), dir)
		}
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dataplane: state_dir %s: open %s: %w", dir, MetaPath(dir), err)
	}
	defer mm.Close()
	raw, err := ReadMetaRaw(mm)
	var h metaHead
	if err == nil {
		h, err = readHead(raw)
	}
	if err != nil {
		return nil, fmt.Errorf("dataplane: state_dir %s: %s is not XLB's pin metadata (%v); the pins are left as they are: if no xlb uses them, remove %s and start again", dir, MetaPath(dir), err, dir)
	}
	if h.magic != pinMagic {
		return nil, fmt.Errorf("dataplane: state_dir %s: %s is not XLB's pin metadata (magic %#x, want %#x); the pins are left as they are: if nothing uses them, remove %s and start again", dir, MetaPath(dir), h.magic, pinMagic, dir)
	}
	if h.version > LayoutVersion {
		return nil, fmt.Errorf("dataplane: state_dir %s holds pins of layout version %d, this xlb reads layouts up to %d: a newer xlb pinned them. Run that version (or newer); to downgrade anyway, stop xlb first (systemctl stop xlb removes the pins, and resets every connection). The pins are left as they are", dir, h.version, LayoutVersion)
	}
	// struct xlb_pin_meta is unchanged since layout 2, the first pinned:
	// a bump that changes it adds a reader of the older record here.
	var rec xlbXlbPinMeta
	switch {
	case h.version == LayoutVersion:
		rec, err = decodeMeta(raw)
	case len(raw) == metaSize:
		copy((*[metaSize]byte)(unsafe.Pointer(&rec))[:], raw)
	default:
		err = fmt.Errorf("this build has no reader for the %d-byte record of layout %d", len(raw), h.version)
	}
	if err != nil {
		return nil, fmt.Errorf("dataplane: state_dir %s: %s: %w; the pins are left as they are", dir, MetaPath(dir), err)
	}
	if rec.NetnsCookie != cookie {
		return nil, fmt.Errorf("dataplane: state_dir %s holds the pins of the xlb (pid %d) of another network namespace (cookie %d; this one is %d): two instances cannot share a state_dir. Give this instance its own state_dir; if that namespace is gone, remove %s and start again. The pins are left as they are", dir, rec.OwnerPid, rec.NetnsCookie, cookie, dir)
	}
	p := &State{Dir: dir, Meta: rec, Maps: map[string]*ebpf.Map{}}
	entries, err := os.ReadDir(filepath.Join(dir, MapsDir))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("dataplane: state_dir %s: %w", dir, err)
	}
	for _, e := range entries {
		m, err := ebpf.LoadPinnedMap(MapPath(dir, e.Name()), nil)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("dataplane: state_dir %s: open pinned map %s: %w", dir, e.Name(), err)
		}
		p.Maps[e.Name()] = m
	}
	return p, nil
}

// pinnedNames lists the pins under maps/ and links/.
func pinnedNames(dir string) []string {
	var out []string
	for _, sub := range []string{MapsDir, LinksDir} {
		entries, _ := os.ReadDir(filepath.Join(dir, sub))
		for _, e := range entries {
			out = append(out, sub+"/"+e.Name())
		}
	}
	return out
}

// finishReplacement completes a replacement a process was interrupted in
// (crash, SIGKILL) or drops an incomplete staging: see the top of this
// file.
func finishReplacement(dir string) error {
	staging := filepath.Join(dir, StagingDir)
	if _, err := os.Stat(filepath.Join(dir, stagingMeta)); err == nil {
		var rels []string
		err := filepath.WalkDir(staging, func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			if rel, _ := filepath.Rel(staging, p); rel != MetaFile {
				rels = append(rels, rel)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, rel := range append(rels, MetaFile) {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, rel)), 0o700); err != nil {
				return err
			}
			if err := os.Rename(filepath.Join(staging, rel), filepath.Join(dir, rel)); err != nil {
				return err
			}
		}
	}
	return errors.Join(os.RemoveAll(staging), os.RemoveAll(filepath.Join(dir, RetiredDir)))
}
