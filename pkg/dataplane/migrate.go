package dataplane

import (
	"bytes"
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
// after each replacement and at Pin (catchUp), which applies what the old
// program did meanwhile (mergeFlows, addDeltas). Maps the program never
// writes (the config, the routable sets) are copied again just before
// this process first writes them (refresh), since the predecessor may
// have published since Load.
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
	5: layout5Step, // migrate_layout5.go
	6: layout6Step, // migrate_layout6.go
	7: layout7Step, // migrate_layout7.go
	8: layout8Step, // migrate_layout8.go
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

// currentLayout is this build's layout. The second pass applies to the
// flow map what the old program did since the last copy (mergeFlows:
// created, replaced and deleted entries, merged close flags and
// last_seen), adds what the old program counted meanwhile to every
// counter (the handshake histograms included), and moves the round-robin
// positions, generation and SNAT cursors on by as much as the old program
// moved them. The close event
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
			xlbMapXlbShared:       addDeltas(8, 1), // the generation; the clock fields are the clock's
			xlbMapXlbRr:           addDeltas(8, 0),
			xlbMapXlbSnatCursors:  addDeltas(4, 0),
		},
		refresh: []string{xlbMapXlbCfg, xlbMapXlbBackendSets, xlbMapXlbServices, xlbMapXlbListen},
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
	// seen is, for each entry of a merged hash map (the flow map), what
	// the last copy read and left (seenEntry), so that the second pass
	// applies only what the old program changed since, and knows whether
	// the new map still holds what the migration put there.
	seen map[string]map[string]seenEntry
	pass uint32 // the copies so far: seenEntry.pass of the entries the last one read
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
		seen: map[string]map[string]seenEntry{}, seed: maphash.MakeSeed(), host: host}, nil
}

// seenEntry is one key of a merged hash map as the last copy saw it.
type seenEntry struct {
	src  uint64 // hash of the source entry as the last copy read it (converted)
	dst  uint64 // hash of the value the migration left in the new map, when owned
	gen  uint32 // that value's generation (struct flow_value), when owned
	pass uint32 // the copy that last read the key in the source
	// owned: the new map held, when the migration last wrote or read
	// it, the value the migration put there (else it holds the new
	// program's entry under that key, or none).
	owned bool
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
			if r.valueSize < flowValueSize {
				return fmt.Errorf("map %s: a %d-byte value is shorter than struct flow_value (%d)", name, r.valueSize, flowValueSize)
			}
			seen := make(map[string]seenEntry, r.len())
			for i := range r.len() {
				h := maphash.Bytes(m.seed, r.entry(i))
				seen[string(r.key(i))] = seenEntry{src: h, dst: h, gen: flowGeneration(r.value(i, 0)), owned: true}
			}
			m.seen[name] = seen
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

// mergeFlows applies to the new flow map what the old program did to
// its own since the last copy, key by key; entries it left as the last
// copy read them are skipped. The old program's entry is the truth where
// the new map still holds what the migration put there: between the
// first copy and the program's replacement only the old program runs, so
// an entry it replaced (a SNAT takeover of a reverse key, a new SYN on a
// terminal pair) replaces the copy, and a key it deleted (a takeover or a
// replacement of the pair, the old process's reaper) is deleted, even
// when the new program meanwhile updated the stale copy (its packets went
// by the stale recipe). What the new program did on its own is kept: an
// entry it put under a key (a pair it created or took over once it ran)
// is never replaced or deleted, and a pair whose entry it deleted is not
// put back. An entry both programs updated for the same pair (same
// generation; on a host whose interfaces are replaced one by one, both
// run for a while) is merged: flags ORed, the later last_seen (and with
// it the sender's window, when the old program tracked one).
//
// Each step reads the new map's entry and then writes it, so an update
// the new program makes to that key in between (one system call) is
// lost, as with addDeltas.
func mergeFlows(m *migration, name string) error {
	src, err := m.read(name)
	if err != nil {
		return err
	}
	if src.valueSize < flowValueSize {
		return fmt.Errorf("a %d-byte flow value is shorter than struct flow_value (%d)", src.valueSize, flowValueSize)
	}
	dst, seen := m.dst[name], m.seen[name]
	if seen == nil {
		seen = map[string]seenEntry{}
		m.seen[name] = seen
	}
	m.pass++
	for i := range src.len() {
		k, h := string(src.key(i)), maphash.Bytes(m.seed, src.entry(i))
		e, ok := seen[k]
		if ok && e.src == h {
			e.pass = m.pass
			seen[k] = e
			continue
		}
		now, err := syncFlow(dst, src.key(i), src.value(i, 0), e, m.seed)
		if err != nil {
			return fmt.Errorf("flow %x: %w", src.key(i), err)
		}
		e = seenEntry{src: h, pass: m.pass}
		if now != nil {
			e.dst, e.gen, e.owned = maphash.Bytes(m.seed, now), flowGeneration(now), true
		}
		seen[k] = e
	}
	for k, e := range seen {
		if e.pass == m.pass {
			continue
		}
		delete(seen, k) // the old program deleted it
		if err := dropFlow(dst, []byte(k), e); err != nil {
			return fmt.Errorf("flow %x: %w", k, err)
		}
	}
	return nil
}

// syncFlow applies the old program's entry val under key to the new map
// (mergeFlows), e being what the last copy saw of the key (hashed with
// seed). It returns the value the new map holds afterwards when it is
// the migration's (nil when the new program's entry, or its deletion, is
// kept).
func syncFlow(dst *ebpf.Map, key, val []byte, e seenEntry, seed maphash.Seed) ([]byte, error) {
	gen := flowGeneration(val)
	for try := 0; ; try++ {
		cur, ok, err := lookupRaw(dst, key)
		if err != nil {
			return nil, err
		}
		var flag ebpf.MapUpdateFlags
		out := val
		switch {
		case !ok && e.owned && e.gen == gen:
			return nil, nil // the new program ended the pair after the copy
		case !ok:
			flag = ebpf.UpdateNoExist // the old program created it, or the new one deleted a pair the old one replaced
		case e.owned && flowGeneration(cur) == e.gen && (gen != e.gen || maphash.Bytes(seed, cur) == e.dst):
			flag = ebpf.UpdateExist // the copy, stale: the old program's entry replaces it
		case flowGeneration(cur) == gen:
			out = mergeFlowValue(cur, val) // both programs updated the pair
			if bytes.Equal(out, cur) {
				return out, nil
			}
			flag = ebpf.UpdateExist
		default:
			return nil, nil // the new program's own pair
		}
		err = dst.Update(key, out, flag)
		if try == 0 && (errors.Is(err, ebpf.ErrKeyExist) || errors.Is(err, ebpf.ErrKeyNotExist)) {
			continue // the new program created or deleted it meanwhile: decide again
		}
		if err != nil {
			return nil, err
		}
		return out, nil
	}
}

// dropFlow deletes key from the new map, the old program having deleted
// it since the last copy, if the new map still holds the migration's
// entry of that pair (e.gen): an entry the new program put there stays.
// The delete returns what it removed (BPF_MAP_LOOKUP_AND_DELETE_ELEM), so
// an entry the new program put there between the check and the delete
// is put back rather than lost.
func dropFlow(dst *ebpf.Map, key []byte, e seenEntry) error {
	if !e.owned {
		return nil
	}
	cur, ok, err := lookupRaw(dst, key)
	if err != nil || !ok || flowGeneration(cur) != e.gen {
		return err
	}
	var gone []byte
	err = dst.LookupAndDelete(key, &gone)
	switch {
	case errors.Is(err, ebpf.ErrKeyNotExist):
		return nil
	case errors.Is(err, ebpf.ErrNotSupported): // before Linux 5.14
		if err := dst.Delete(key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return err
		}
		return nil
	case err != nil:
		return err
	}
	if flowGeneration(gone) != e.gen {
		if err := dst.Update(key, gone, ebpf.UpdateNoExist); err != nil && !errors.Is(err, ebpf.ErrKeyExist) {
			return fmt.Errorf("put back the new program's entry: %w", err)
		}
	}
	return nil
}

// mergeFlowValue is cur, an entry of the new map, with what the old
// program's entry old of the same pair adds: its flags, and its
// last_seen when later (with the sender's window when it saw the ACK).
// Bytes after struct flow_value are cur's.
func mergeFlowValue(cur, old []byte) []byte {
	var a, b FlowValue
	decodeFlowValue(old, &a)
	decodeFlowValue(cur, &b)
	merged := b
	merged.Flags |= a.Flags
	if int32(a.LastSeen-b.LastSeen) > 0 {
		merged.LastSeen = a.LastSeen
		if a.Flags&FlagACKSeen != 0 { // the old program saw the later ACK: its window is the current one
			merged.TrackSeq, merged.TrackWin, merged.Wscale = a.TrackSeq, a.TrackWin, a.Wscale
		}
	}
	out := slices.Clone(cur)
	copy(out, toBytes(&merged))
	return out
}

// flowGeneration is the generation of the struct flow_value at the start
// of raw.
func flowGeneration(raw []byte) uint32 {
	return binary.NativeEndian.Uint32(raw[unsafe.Offsetof(FlowValue{}.Generation):])
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
