package pins

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"maps"
	"net/netip"
	"os"
	"slices"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
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

// Converter converts the entries of one map from one layout to the
// next. The sizes it returns must be the next layout's.
type Converter struct {
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
	Prepare func(c *PassContext) (Converter, error)
}

// PassContext is what a converter's Prepare is given.
type PassContext struct {
	// Dst is the new maps, by name: this build's layout.
	Dst map[string]*ebpf.Map
	// Host answers what a converter asks of the host.
	Host Host
}

// Host is what converters may ask of the host the pins belong
// to (pkg/dataplane's Dataplane.migrationHost; tests pass their own).
type Host struct {
	// Neighbours lists the IPv4 neighbours of the interface ifindex that
	// hold a link-layer address, in the caller's network namespace.
	Neighbours func(ifindex int) ([]Neighbour, error)
	// Now reads the data path's clock (jiffies, low 32 bits).
	Now func() (uint32, error)
	// ClaimNextHop finds the slot of the next-hop map m (xlb_nexthops)
	// that holds want, or claims a free one in the data path's probe
	// sequence and writes want there, and returns its index.
	ClaimNextHop func(m *ebpf.Map, want NextHop) (uint32, error)
}

// Neighbour is an IPv4 neighbour and its link-layer address.
type Neighbour struct {
	IP  netip.Addr
	MAC [6]byte
}

// Step is what changed from layout From to From+1: a converter per
// map whose entries changed, by the map's name. Maps it does not name are
// copied unchanged; a map new in From+1 starts empty; a map gone in From+1
// is dropped.
type Step struct {
	From uint32
	Maps map[string]Converter
}

// layoutSteps are this build's conversions, by source layout. Layout 2 is
// the first one ever pinned; a bump of XLB_LAYOUT_VERSION (bpf/layout.h)
// adds the step from the version before it, and every older pin keeps
// migrating through the chain.
var layoutSteps = map[uint32]Step{
	2:  layout2Step,  // layout2.go
	3:  layout3Step,  // layout3.go
	4:  layout4Step,  // layout4.go
	5:  layout5Step,  // layout5.go
	6:  layout6Step,  // layout6.go
	7:  layout7Step,  // layout7.go
	8:  layout8Step,  // layout8.go
	9:  layout9Step,  // layout9.go
	10: layout10Step, // layout10.go
}

// Layout is what a migration copies into: the version, the steps that
// reach it from older ones, and the second pass of each map (catchUp)
// and the maps only userspace writes (refresh).
type Layout struct {
	Version uint32
	Steps   map[uint32]Step
	Merge   map[string]Merger
	Refresh []string
}

// Merger merges what the predecessor's program did to a source map since
// the last copy into the new map.
type Merger func(m *Migration, name string) error

// CurrentLayout is this build's layout. The second pass applies to the
// flow map what the old program did since the last copy (mergeFlows:
// created, replaced and deleted entries, merged close flags and
// last_seen), adds what the old program counted meanwhile to every
// counter (the handshake histograms included), and moves the round-robin
// positions, generation and SNAT cursors on by as much as the old program
// moved them. The close event
// queues are not merged: events posted to the old ones after the copy are
// lost, and the maintenance walk finds those pairs instead.
func CurrentLayout() Layout {
	return Layout{
		Version: LayoutVersion,
		Steps:   layoutSteps,
		Merge: map[string]Merger{
			xlbMapXlbFlows:        mergeFlows,
			xlbMapXlbCounters:     addDeltas(8, 0),
			xlbMapXlbBackendStats: addDeltas(8, 0),
			xlbMapXlbPairEvents:   addDeltas(8, 0),
			xlbMapXlbReaped:       addDeltas(8, 0),
			xlbMapXlbHandshake:    addDeltas(8, 0),
			xlbMapXlbShared:       addDeltas(8, 1), // the generation; the clock fields are the clock's
			xlbMapXlbRr:           addDeltas(8, 0),
			xlbMapXlbSnatCursors:  addDeltas(4, 0),
			xlbMapXlbUdpUnreplied: addDeltas(8, 0),
			xlbMapXlbSvcCounters:  addDeltas(8, 0),
		},
		Refresh: []string{xlbMapXlbCfg, xlbMapXlbBackendSets, xlbMapXlbServices, xlbMapXlbListen, xlbMapXlbSched},
	}
}

// Migration is one copy from a predecessor's maps into this build's.
type Migration struct {
	layout Layout
	from   uint32                 // the source's layout
	src    map[string]*ebpf.Map   // the pinned maps copied from (owned: closed by close)
	dst    map[string]*ebpf.Map   // the new maps, by name (not owned)
	batch  bool                   // use batch map operations
	base   map[string]*RawEntries // converted source entries at the last copy, for addDeltas
	// seen is, for each entry of a merged hash map (the flow map), what
	// the last copy read and left (seenEntry), so that the second pass
	// applies only what the old program changed since, and knows whether
	// the new map still holds what the migration put there.
	seen map[string]map[string]seenEntry
	pass uint32 // the copies so far: seenEntry.pass of the entries the last one read
	seed maphash.Seed
	host Host
	// Derive, when set, rebuilds the new maps' derived state (the SNAT
	// port bitmap) from what the copy produced: the last thing of each
	// copyAll and catchUp.
	Derive func() error
}

// NewMigration checks that every step from layout from to l.version is
// known.
func NewMigration(l Layout, from uint32, src, dst map[string]*ebpf.Map, batch bool, host Host) (*Migration, error) {
	if from > l.Version {
		return nil, fmt.Errorf("layout %d is newer than this build's %d", from, l.Version)
	}
	for v := from; v < l.Version; v++ {
		if _, ok := l.Steps[v]; !ok {
			return nil, fmt.Errorf("this build has no conversion from layout %d to %d (it migrates pins of layouts %s)", v, v+1, knownLayouts(l))
		}
	}
	return &Migration{layout: l, from: from, src: src, dst: dst, batch: batch, base: map[string]*RawEntries{},
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
func knownLayouts(l Layout) string {
	lo := l.Version
	for lo > 0 {
		if _, ok := l.Steps[lo-1]; !ok {
			break
		}
		lo--
	}
	if lo == l.Version {
		return fmt.Sprintf("%d only", lo)
	}
	return fmt.Sprintf("%d to %d", lo, l.Version)
}

// CopyAll is the first pass: every map both sides have, converted. A map
// only the new layout has stays empty; a ring buffer has nothing to copy.
func (m *Migration) CopyAll() error {
	for _, name := range slices.Sorted(maps.Keys(m.dst)) {
		src, dst := m.src[name], m.dst[name]
		if src == nil || skipCopy(src, dst) {
			continue
		}
		if src.Type() != dst.Type() {
			return fmt.Errorf("map %s: type %s, this build's is %s", name, src.Type(), dst.Type())
		}
		if dst.Type() == ebpf.ArrayOfMaps {
			if err := copyInnerMaps(src, dst); err != nil {
				return fmt.Errorf("map %s: %w", name, err)
			}
			continue
		}
		r, err := m.read(name)
		if err != nil {
			return err
		}
		if dst.Type() == ebpf.Hash && r.Len() > int(dst.MaxEntries()) {
			return fmt.Errorf("map %s: %d entries do not fit the new map's %d", name, r.Len(), dst.MaxEntries())
		}
		if err := WriteEntries(dst, r, m.batch); err != nil {
			return fmt.Errorf("map %s: %w", name, err)
		}
		switch {
		case m.layout.Merge[name] == nil:
		case dst.Type() == ebpf.Hash:
			if r.ValueSize < FlowValueSize {
				return fmt.Errorf("map %s: a %d-byte value is shorter than struct flow_value (%d)", name, r.ValueSize, FlowValueSize)
			}
			seen := make(map[string]seenEntry, r.Len())
			for i := range r.Len() {
				h := maphash.Bytes(m.seed, r.Entry(i))
				seen[string(r.Key(i))] = seenEntry{src: h, dst: h, gen: flowGeneration(r.Value(i, 0)), owned: true}
			}
			m.seen[name] = seen
		default:
			m.base[name] = r
		}
	}
	return m.deriveState()
}

// deriveState runs derive.
func (m *Migration) deriveState() error {
	if m.Derive == nil {
		return nil
	}
	return m.Derive()
}

// skipCopy: a ring buffer's records cannot be copied (a new ring starts
// empty), and neither into nor out of the one-slot array that stands in
// for a refused ring buffer. An array of maps is not copied entry by
// entry either: its values are references (copyInnerMaps).
func skipCopy(src, dst *ebpf.Map) bool {
	return src.Type() == ebpf.RingBuf || dst.Type() == ebpf.RingBuf ||
		(src.Type() == ebpf.ArrayOfMaps) != (dst.Type() == ebpf.ArrayOfMaps)
}

// copyInnerMaps makes every slot of the array of maps dst refer to the
// inner map src's slot refers to (the schedules of xlb_sched: a later
// layout keeps them), and empties the slots src has none at. The lookup
// gives an inner map's id; opening it by id needs CAP_SYS_ADMIN. Without
// it (the packaged unit grants CAP_BPF and CAP_NET_ADMIN only) dst is
// left empty: each service's next published set rebuilds its table, and
// until then its SYNs use round robin (XLB_C_SCHED_FALLBACK).
func copyInnerMaps(src, dst *ebpf.Map) error {
	for k := range src.MaxEntries() {
		if k >= dst.MaxEntries() {
			break
		}
		var id uint32
		err := src.Lookup(k, &id)
		if errors.Is(err, ebpf.ErrKeyNotExist) || (err == nil && id == 0) {
			if err := dst.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return fmt.Errorf("clear slot %d: %w", k, err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("read slot %d: %w", k, err)
		}
		inner, err := ebpf.NewMapFromID(ebpf.MapID(id))
		if errors.Is(err, os.ErrPermission) || errors.Is(err, unix.EPERM) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("open the inner map %d of slot %d: %w", id, k, err)
		}
		err = dst.Put(k, inner)
		inner.Close()
		if err != nil {
			return fmt.Errorf("write slot %d: %w", k, err)
		}
	}
	return nil
}

// read dumps the source map name and converts it to the new layout.
func (m *Migration) read(name string) (*RawEntries, error) {
	r, err := DumpMap(m.src[name], m.batch)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", name, err)
	}
	return m.convert(name, r)
}

// convert runs r, entries of map name in the source layout, through every
// step to the new layout.
func (m *Migration) convert(name string, r *RawEntries) (*RawEntries, error) {
	dst := m.dst[name]
	for v := m.from; v < m.layout.Version; v++ {
		c, ok := m.layout.Steps[v].Maps[name]
		if !ok {
			continue
		}
		if c.Prepare != nil {
			var err error
			if c, err = c.Prepare(&PassContext{Dst: m.dst, Host: m.host}); err != nil {
				return nil, fmt.Errorf("map %s: layout %d to %d: %w", name, v, v+1, err)
			}
		}
		out := NewRawEntries(r.KeySize, r.ValueSize, r.NCPU)
		if v+1 == m.layout.Version { // the last step must produce the new map's sizes
			out.KeySize, out.ValueSize = int(dst.KeySize()), int(dst.ValueSize())
		}
		for i := range r.Len() {
			k, err := apply(c.Key, r.Key(i))
			if err != nil {
				return nil, fmt.Errorf("map %s: layout %d to %d: key %x: %w", name, v, v+1, r.Key(i), err)
			}
			var vals []byte
			for cpu := range r.NCPU {
				val, err := applyValue(c.Value, r.Key(i), r.Value(i, cpu))
				if err != nil {
					return nil, fmt.Errorf("map %s: layout %d to %d: value of key %x: %w", name, v, v+1, r.Key(i), err)
				}
				if i == 0 && cpu == 0 && v+1 < m.layout.Version {
					out.KeySize, out.ValueSize = len(k), len(val)
				}
				if len(k) != out.KeySize || len(val) != out.ValueSize {
					return nil, fmt.Errorf("map %s: layout %d to %d: the converter made a %d/%d-byte key/value, want %d/%d", name, v, v+1, len(k), len(val), out.KeySize, out.ValueSize)
				}
				vals = append(vals, val...)
			}
			out.Add(k, vals)
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

// CatchUp is the second pass: every map with a merger, in name order,
// then derive.
func (m *Migration) CatchUp() error {
	for _, name := range slices.Sorted(maps.Keys(m.layout.Merge)) {
		if m.src[name] == nil || m.dst[name] == nil || skipCopy(m.src[name], m.dst[name]) {
			continue
		}
		if err := m.layout.Merge[name](m, name); err != nil {
			return fmt.Errorf("second copy of map %s: %w", name, err)
		}
	}
	if err := m.deriveState(); err != nil {
		return fmt.Errorf("after the second copy: %w", err)
	}
	return nil
}

// Refresh copies the maps only userspace writes again, whole.
func (m *Migration) Refresh() error {
	for _, name := range m.layout.Refresh {
		if m.src[name] == nil || m.dst[name] == nil {
			continue
		}
		if m.dst[name].Type() == ebpf.ArrayOfMaps {
			if m.src[name].Type() != ebpf.ArrayOfMaps {
				continue
			}
			if err := copyInnerMaps(m.src[name], m.dst[name]); err != nil {
				return fmt.Errorf("map %s: %w", name, err)
			}
			continue
		}
		r, err := m.read(name)
		if err != nil {
			return err
		}
		if err := WriteEntries(m.dst[name], r, m.batch); err != nil {
			return fmt.Errorf("map %s: %w", name, err)
		}
	}
	return nil
}

// Close releases the source maps.
func (m *Migration) Close() error {
	var errs []error
	for _, s := range m.src {
		errs = append(errs, s.Close())
	}
	m.src = map[string]*ebpf.Map{}
	return errors.Join(errs...)
}

// FlowValueSize is the bytes of struct flow_value in this layout; later
// layouts that only append to it merge with mergeFlows too.
const FlowValueSize = int(unsafe.Sizeof(xlbFlowValue{}))

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
func mergeFlows(m *Migration, name string) error {
	src, err := m.read(name)
	if err != nil {
		return err
	}
	if src.ValueSize < FlowValueSize {
		return fmt.Errorf("a %d-byte flow value is shorter than struct flow_value (%d)", src.ValueSize, FlowValueSize)
	}
	dst, seen := m.dst[name], m.seen[name]
	if seen == nil {
		seen = map[string]seenEntry{}
		m.seen[name] = seen
	}
	m.pass++
	for i := range src.Len() {
		k, h := string(src.Key(i)), maphash.Bytes(m.seed, src.Entry(i))
		e, ok := seen[k]
		if ok && e.src == h {
			e.pass = m.pass
			seen[k] = e
			continue
		}
		now, err := syncFlow(dst, src.Key(i), src.Value(i, 0), e, m.seed)
		if err != nil {
			return fmt.Errorf("flow %x: %w", src.Key(i), err)
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
	var a, b xlbFlowValue
	decodeFlowValue(old, &a)
	decodeFlowValue(cur, &b)
	merged := b
	merged.Flags |= a.Flags
	if int32(a.LastSeen-b.LastSeen) > 0 {
		merged.LastSeen = a.LastSeen
		if a.Flags&uint32(xlbXlbFlowFlagsXLB_F_ACK_SEEN) != 0 { // the old program saw the later ACK: its window is the current one
			merged.TrackSeq, merged.TrackWin, merged.Wscale = a.TrackSeq, a.TrackWin, a.Wscale
		}
	}
	out := slices.Clone(cur)
	copy(out, ToBytes(&merged))
	return out
}

// flowGeneration is the generation of the struct flow_value at the start
// of raw.
func flowGeneration(raw []byte) uint32 {
	return binary.NativeEndian.Uint32(raw[unsafe.Offsetof(xlbFlowValue{}.Generation):])
}

// decodeFlowValue reads the struct flow_value at the start of raw.
func decodeFlowValue(raw []byte, v *xlbFlowValue) {
	*v, _ = FromBytes[xlbFlowValue](raw[:FlowValueSize])
}

// FromBytes reads a T laid out as the kernel holds it from b, which must
// be exactly its size.
func FromBytes[T any](b []byte) (T, error) {
	var v T
	if len(b) != int(unsafe.Sizeof(v)) {
		return v, fmt.Errorf("%d bytes, want %d", len(b), unsafe.Sizeof(v))
	}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&v)), unsafe.Sizeof(v)), b)
	return v, nil
}

// ToBytes is v as the kernel holds it.
func ToBytes[T any](v *T) []byte {
	return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v))...)
}

// addDeltas merges an array of counters: each of the first words words of
// width bytes (all when words is 0) of every entry and CPU gains what the
// old program added to it since the last copy. A count the new program
// adds between this pass's read and write of the same cell is lost (the
// update is not atomic); the window is one syscall.
func addDeltas(width, words int) Merger {
	return func(m *Migration, name string) error {
		now, err := m.read(name)
		if err != nil {
			return err
		}
		base := m.base[name]
		if base == nil || base.Len() != now.Len() || base.ValueSize != now.ValueSize || base.NCPU != now.NCPU {
			return fmt.Errorf("the source changed shape since the first copy")
		}
		dst := m.dst[name]
		n := now.ValueSize / width
		if words > 0 {
			n = min(n, words)
		}
		for i := range now.Len() {
			delta := make([]uint64, n*now.NCPU)
			moved := false
			for cpu := range now.NCPU {
				a, b := base.Value(i, cpu), now.Value(i, cpu)
				for w := range n {
					d := word(b, w, width) - word(a, w, width)
					delta[cpu*n+w] = d
					moved = moved || d != 0
				}
			}
			if !moved {
				continue
			}
			cur, ok, err := lookupRaw(dst, now.Key(i))
			if err == nil && !ok {
				err = ebpf.ErrKeyNotExist // an array has every key
			}
			if err != nil {
				return fmt.Errorf("key %x: %w", now.Key(i), err)
			}
			upd := NewRawEntries(now.KeySize, now.ValueSize, now.NCPU)
			for cpu := range now.NCPU {
				v := cur[cpu*now.ValueSize : (cpu+1)*now.ValueSize]
				for w := range n {
					setWord(v, w, width, word(v, w, width)+delta[cpu*n+w])
				}
			}
			upd.Add(now.Key(i), cur)
			if err := putRaw(dst, upd, 0, ebpf.UpdateExist); err != nil {
				return fmt.Errorf("key %x: %w", now.Key(i), err)
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
