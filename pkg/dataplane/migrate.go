package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"maps"
	"net/netip"
	"slices"
	"unsafe"

	"github.com/cilium/ebpf"
)

// Migration copies a predecessor's pinned maps entry by entry into this
// build's new maps (DESIGN §6): when the pins are of an older layout
// (every map, each entry through the converters from the pins' layout to
// this one) or when only flow_table.max_connections changed (the flow map
// alone; the others are adopted as they are). The predecessor's program
// keeps running on the old maps until this process's program replaces it
// on every interface, so the copy is taken twice: once at Load, and again
// after each replacement and at Pin (catchUp), which merges what the old
// program did meanwhile. Maps the program never writes (the config, the
// routable sets) are copied again just before this process first writes
// them (refresh), since the predecessor may have published since Load.
// Derived state (the SNAT port bitmap) is not copied but rebuilt from the
// flow map after each pass (migration.derive).

// entryConverter converts the entries of one map from one layout to the
// next. The sizes it returns must be the next layout's.
type entryConverter struct {
	// Key converts a key; nil keeps it as it is.
	Key func(old []byte) ([]byte, error)
	// Value converts one value (one CPU's, in a per-CPU map) of the entry
	// under key (as the older layout has it); nil keeps it.
	Value func(key, old []byte) ([]byte, error)
	// Prepare, when set, makes the converter of one pass over the map's
	// entries (the first copy, each second copy, each refresh), whose own
	// Prepare is not called: for a conversion that reads the host or
	// writes into the new maps (passContext), and keeps what it learnt
	// for the rest of the pass.
	Prepare func(c *passContext) (entryConverter, error)
}

// passContext is what a converter's Prepare is given.
type passContext struct {
	// Dst is the new maps, by name: this build's layout.
	Dst map[string]*ebpf.Map
	// Host answers what a converter asks of the host.
	Host migrationHost
}

// migrationHost is what converters may ask of the host the pins belong
// to (Dataplane.migrationHost; tests pass their own).
type migrationHost struct {
	// Neighbours lists the IPv4 neighbours of the interface ifindex that
	// hold a link-layer address, in the caller's network namespace.
	Neighbours func(ifindex int) ([]neighbour, error)
	// Now reads the data path's clock (jiffies, low 32 bits).
	Now func() (uint32, error)
}

// neighbour is an IPv4 neighbour and its link-layer address.
type neighbour struct {
	IP  netip.Addr
	MAC [6]byte
}

// layoutStep is what changed from layout From to From+1: a converter per
// map whose entries changed, by the map's name. Maps it does not name are
// copied unchanged; a map new in From+1 starts empty; a map gone in From+1
// is dropped.
type layoutStep struct {
	From uint32
	Maps map[string]entryConverter
}

// layoutSteps are this build's conversions, by source layout. Layout 2 is
// the first one ever pinned; a bump of XLB_LAYOUT_VERSION (bpf/layout.h)
// adds the step from the version before it, and every older pin keeps
// migrating through the chain.
var layoutSteps = map[uint32]layoutStep{
	2: layout2Step, // migrate_layout2.go
	3: layout3Step, // migrate_layout3.go
	4: layout4Step, // migrate_layout4.go
}

// layout is what a migration copies into: the version, the steps that
// reach it from older ones, and the second pass of each map (catchUp)
// and the maps only userspace writes (refresh).
type layout struct {
	version uint32
	steps   map[uint32]layoutStep
	merge   map[string]merger
	refresh []string
}

// merger merges what the predecessor's program did to a source map since
// the last copy into the new map.
type merger func(m *migration, name string) error

// currentLayout is this build's layout. The second pass keeps every flow
// (inserting those the old program created, merging close flags and
// last_seen), adds what the old program counted meanwhile to every
// counter (the handshake histograms included), and moves the round-robin position, generation and SNAT
// cursors on by as much as the old program moved them. The close event
// queues are not merged: events posted to the old ones after the copy are
// lost, and the maintenance walk finds those pairs instead.
func currentLayout() layout {
	return layout{
		version: layoutVersion,
		steps:   layoutSteps,
		merge: map[string]merger{
			xlbMapXlbFlows:        mergeFlows,
			xlbMapXlbCounters:     addDeltas(8, 0),
			xlbMapXlbBackendStats: addDeltas(8, 0),
			xlbMapXlbPairEvents:   addDeltas(8, 0),
			xlbMapXlbReaped:       addDeltas(8, 0),
			xlbMapXlbHandshake:    addDeltas(8, 0),
			xlbMapXlbShared:       addDeltas(8, 2), // rr and generation; the clock fields are the clock's
			xlbMapXlbSnatCursors:  addDeltas(4, 0),
		},
		refresh: []string{xlbMapXlbCfg, xlbMapXlbBackendSets},
	}
}

// migration is one copy from a predecessor's maps into this build's.
type migration struct {
	layout layout
	from   uint32                 // the source's layout
	src    map[string]*ebpf.Map   // the pinned maps copied from (owned: closed by close)
	dst    map[string]*ebpf.Map   // the new maps, by name (not owned)
	batch  bool                   // use batch map operations
	base   map[string]*rawEntries // converted source entries at the last copy, for addDeltas
	// seen fingerprints each entry of a merged hash map as the last copy
	// read it (key → hash of the value), so that the second pass merges
	// only what the old program changed since.
	seen map[string]map[string]uint64
	seed maphash.Seed
	host migrationHost
	// derive, when set, rebuilds the new maps' derived state (the SNAT
	// port bitmap) from what the copy produced: the last thing of each
	// copyAll and catchUp.
	derive func() error
}

// newMigration checks that every step from layout from to l.version is
// known.
func newMigration(l layout, from uint32, src, dst map[string]*ebpf.Map, batch bool, host migrationHost) (*migration, error) {
	if from > l.version {
		return nil, fmt.Errorf("layout %d is newer than this build's %d", from, l.version)
	}
	for v := from; v < l.version; v++ {
		if _, ok := l.steps[v]; !ok {
			return nil, fmt.Errorf("this build has no conversion from layout %d to %d (it migrates pins of layouts %s)", v, v+1, knownLayouts(l))
		}
	}
	return &migration{layout: l, from: from, src: src, dst: dst, batch: batch, base: map[string]*rawEntries{},
		seen: map[string]map[string]uint64{}, seed: maphash.MakeSeed(), host: host}, nil
}

// knownLayouts names the layouts l migrates from, as "a..b".
func knownLayouts(l layout) string {
	lo := l.version
	for lo > 0 {
		if _, ok := l.steps[lo-1]; !ok {
			break
		}
		lo--
	}
	if lo == l.version {
		return fmt.Sprintf("%d only", lo)
	}
	return fmt.Sprintf("%d to %d", lo, l.version)
}

// copyAll is the first pass: every map both sides have, converted. A map
// only the new layout has stays empty; a ring buffer has nothing to copy.
func (m *migration) copyAll() error {
	for _, name := range slices.Sorted(maps.Keys(m.dst)) {
		src, dst := m.src[name], m.dst[name]
		if src == nil || skipCopy(src, dst) {
			continue
		}
		if src.Type() != dst.Type() {
			return fmt.Errorf("map %s: type %s, this build's is %s", name, src.Type(), dst.Type())
		}
		r, err := m.read(name)
		if err != nil {
			return err
		}
		if dst.Type() == ebpf.Hash && r.len() > int(dst.MaxEntries()) {
			return fmt.Errorf("map %s: %d entries do not fit the new map's %d", name, r.len(), dst.MaxEntries())
		}
		if err := writeEntries(dst, r, m.batch); err != nil {
			return fmt.Errorf("map %s: %w", name, err)
		}
		switch {
		case m.layout.merge[name] == nil:
		case dst.Type() == ebpf.Hash:
			m.seen[name] = map[string]uint64{}
			for i := range r.len() {
				m.seen[name][string(r.key(i))] = maphash.Bytes(m.seed, r.entry(i))
			}
		default:
			m.base[name] = r
		}
	}
	return m.deriveState()
}

// deriveState runs derive.
func (m *migration) deriveState() error {
	if m.derive == nil {
		return nil
	}
	return m.derive()
}

// skipCopy: a ring buffer's records cannot be copied (a new ring starts
// empty), and neither into nor out of the one-slot array that stands in
// for a refused ring buffer.
func skipCopy(src, dst *ebpf.Map) bool {
	return src.Type() == ebpf.RingBuf || dst.Type() == ebpf.RingBuf
}

// read dumps the source map name and converts it to the new layout.
func (m *migration) read(name string) (*rawEntries, error) {
	r, err := dumpMap(m.src[name], m.batch)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", name, err)
	}
	return m.convert(name, r)
}

// convert runs r, entries of map name in the source layout, through every
// step to the new layout.
func (m *migration) convert(name string, r *rawEntries) (*rawEntries, error) {
	dst := m.dst[name]
	for v := m.from; v < m.layout.version; v++ {
		c, ok := m.layout.steps[v].Maps[name]
		if !ok {
			continue
		}
		if c.Prepare != nil {
			var err error
			if c, err = c.Prepare(&passContext{Dst: m.dst, Host: m.host}); err != nil {
				return nil, fmt.Errorf("map %s: layout %d to %d: %w", name, v, v+1, err)
			}
		}
		out := newRawEntries(r.keySize, r.valueSize, r.ncpu)
		if v+1 == m.layout.version { // the last step must produce the new map's sizes
			out.keySize, out.valueSize = int(dst.KeySize()), int(dst.ValueSize())
		}
		for i := range r.len() {
			k, err := apply(c.Key, r.key(i))
			if err != nil {
				return nil, fmt.Errorf("map %s: layout %d to %d: key %x: %w", name, v, v+1, r.key(i), err)
			}
			var vals []byte
			for cpu := range r.ncpu {
				val, err := applyValue(c.Value, r.key(i), r.value(i, cpu))
				if err != nil {
					return nil, fmt.Errorf("map %s: layout %d to %d: value of key %x: %w", name, v, v+1, r.key(i), err)
				}
				if i == 0 && cpu == 0 && v+1 < m.layout.version {
					out.keySize, out.valueSize = len(k), len(val)
				}
				if len(k) != out.keySize || len(val) != out.valueSize {
					return nil, fmt.Errorf("map %s: layout %d to %d: the converter made a %d/%d-byte key/value, want %d/%d", name, v, v+1, len(k), len(val), out.keySize, out.valueSize)
				}
				vals = append(vals, val...)
			}
			out.add(k, vals)
		}
		r = out
	}
	return r, nil
}

func apply(f func([]byte) ([]byte, error), b []byte) ([]byte, error) {
	if f == nil {
		return b, nil
	}
	return f(slices.Clone(b))
}

func applyValue(f func(key, old []byte) ([]byte, error), k, b []byte) ([]byte, error) {
	if f == nil {
		return b, nil
	}
	return f(slices.Clone(k), slices.Clone(b))
}

// catchUp is the second pass: every map with a merger, in name order,
// then derive.
func (m *migration) catchUp() error {
	for _, name := range slices.Sorted(maps.Keys(m.layout.merge)) {
		if m.src[name] == nil || m.dst[name] == nil || skipCopy(m.src[name], m.dst[name]) {
			continue
		}
		if err := m.layout.merge[name](m, name); err != nil {
			return fmt.Errorf("second copy of map %s: %w", name, err)
		}
	}
	if err := m.deriveState(); err != nil {
		return fmt.Errorf("after the second copy: %w", err)
	}
	return nil
}

// refresh copies the maps only userspace writes again, whole.
func (m *migration) refresh() error {
	for _, name := range m.layout.refresh {
		if m.src[name] == nil || m.dst[name] == nil {
			continue
		}
		r, err := m.read(name)
		if err != nil {
			return err
		}
		if err := writeEntries(m.dst[name], r, m.batch); err != nil {
			return fmt.Errorf("map %s: %w", name, err)
		}
	}
	return nil
}

// close releases the source maps.
func (m *migration) close() error {
	var errs []error
	for _, s := range m.src {
		errs = append(errs, s.Close())
	}
	m.src = map[string]*ebpf.Map{}
	return errors.Join(errs...)
}

// flowValueSize is the bytes of struct flow_value in this layout; later
// layouts that only append to it merge with mergeFlows too.
const flowValueSize = int(unsafe.Sizeof(FlowValue{}))

// mergeFlows inserts the flow entries the old program created since the
// last copy and, for an entry both sides hold for the same pair (same
// generation), ORs the flags together and keeps the later last_seen (and
// with it the sender's window, when the old program tracked one). An
// entry the new program holds for another pair (a new SYN on the tuple
// met no entry) is kept. Entries the old program left as the last copy
// read them are skipped.
func mergeFlows(m *migration, name string) error {
	src, err := m.read(name)
	if err != nil {
		return err
	}
	dst, seen := m.dst[name], m.seen[name]
	if seen == nil {
		seen = map[string]uint64{}
		m.seen[name] = seen
	}
	for i := range src.len() {
		k, h := string(src.key(i)), maphash.Bytes(m.seed, src.entry(i))
		if old, ok := seen[k]; ok && old == h {
			continue
		}
		if err := mergeFlow(dst, src, i); err != nil {
			return fmt.Errorf("flow %x: %w", src.key(i), err)
		}
		seen[k] = h
	}
	return nil
}

func mergeFlow(dst *ebpf.Map, src *rawEntries, i int) error {
	if src.valueSize < flowValueSize {
		return fmt.Errorf("a %d-byte flow value is shorter than struct flow_value (%d)", src.valueSize, flowValueSize)
	}
	for try := 0; ; try++ {
		cur, ok, err := lookupRaw(dst, src.key(i))
		if err != nil {
			return err
		}
		if !ok {
			err := putRaw(dst, src, i, ebpf.UpdateNoExist)
			if errors.Is(err, ebpf.ErrKeyExist) && try == 0 {
				continue // the new program created it meanwhile: merge
			}
			return err
		}
		var a, b FlowValue
		decodeFlowValue(src.value(i, 0), &a)
		decodeFlowValue(cur, &b)
		if a.Generation != b.Generation {
			return nil
		}
		merged := b
		merged.Flags |= a.Flags
		if int32(a.LastSeen-b.LastSeen) > 0 {
			merged.LastSeen = a.LastSeen
			if a.Flags&FlagACKSeen != 0 { // the old program saw the later ACK: its window is the current one
				merged.TrackSeq, merged.TrackWin, merged.Wscale = a.TrackSeq, a.TrackWin, a.Wscale
			}
		}
		if merged == b {
			return nil
		}
		out := slices.Clone(cur)
		copy(out, toBytes(&merged))
		return dst.Update(src.key(i), out, ebpf.UpdateExist)
	}
}

// decodeFlowValue reads the struct flow_value at the start of raw.
func decodeFlowValue(raw []byte, v *FlowValue) {
	*v, _ = fromBytes[FlowValue](raw[:flowValueSize])
}

// fromBytes reads a T laid out as the kernel holds it from b, which must
// be exactly its size.
func fromBytes[T any](b []byte) (T, error) {
	var v T
	if len(b) != int(unsafe.Sizeof(v)) {
		return v, fmt.Errorf("%d bytes, want %d", len(b), unsafe.Sizeof(v))
	}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&v)), unsafe.Sizeof(v)), b)
	return v, nil
}

// toBytes is v as the kernel holds it.
func toBytes[T any](v *T) []byte {
	return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v))...)
}

// addDeltas merges an array of counters: each of the first words words of
// width bytes (all when words is 0) of every entry and CPU gains what the
// old program added to it since the last copy. A count the new program
// adds between this pass's read and write of the same cell is lost (the
// update is not atomic); the window is one syscall.
func addDeltas(width, words int) merger {
	return func(m *migration, name string) error {
		now, err := m.read(name)
		if err != nil {
			return err
		}
		base := m.base[name]
		if base == nil || base.len() != now.len() || base.valueSize != now.valueSize || base.ncpu != now.ncpu {
			return fmt.Errorf("the source changed shape since the first copy")
		}
		dst := m.dst[name]
		n := now.valueSize / width
		if words > 0 {
			n = min(n, words)
		}
		for i := range now.len() {
			delta := make([]uint64, n*now.ncpu)
			moved := false
			for cpu := range now.ncpu {
				a, b := base.value(i, cpu), now.value(i, cpu)
				for w := range n {
					d := word(b, w, width) - word(a, w, width)
					delta[cpu*n+w] = d
					moved = moved || d != 0
				}
			}
			if !moved {
				continue
			}
			cur, ok, err := lookupRaw(dst, now.key(i))
			if err == nil && !ok {
				err = ebpf.ErrKeyNotExist // an array has every key
			}
			if err != nil {
				return fmt.Errorf("key %x: %w", now.key(i), err)
			}
			upd := newRawEntries(now.keySize, now.valueSize, now.ncpu)
			for cpu := range now.ncpu {
				v := cur[cpu*now.valueSize : (cpu+1)*now.valueSize]
				for w := range n {
					setWord(v, w, width, word(v, w, width)+delta[cpu*n+w])
				}
			}
			upd.add(now.key(i), cur)
			if err := putRaw(dst, upd, 0, ebpf.UpdateExist); err != nil {
				return fmt.Errorf("key %x: %w", now.key(i), err)
			}
		}
		m.base[name] = now
		return nil
	}
}

func word(b []byte, w, width int) uint64 {
	if width == 4 {
		return uint64(binary.NativeEndian.Uint32(b[w*4:]))
	}
	return binary.NativeEndian.Uint64(b[w*8:])
}

func setWord(b []byte, w, width int, v uint64) {
	if width == 4 {
		binary.NativeEndian.PutUint32(b[w*4:], uint32(v))
		return
	}
	binary.NativeEndian.PutUint64(b[w*8:], v)
}
