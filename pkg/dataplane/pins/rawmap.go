package pins

import (
	"errors"
	"fmt"
	"reflect"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// RawEntries are entries of a map as bytes, in the sizes the kernel
// reports for the map, whatever layout built it: migrations read a
// predecessor's maps with them. Entry i is keys[i*keySize:] and, for each
// of the ncpu values (one per possible CPU for a per-CPU map, else one),
// values[(i*ncpu+cpu)*valueSize:].
type RawEntries struct {
	KeySize, ValueSize, NCPU int
	keys, values             []byte
}

func NewRawEntries(keySize, valueSize, ncpu int) *RawEntries {
	return &RawEntries{KeySize: keySize, ValueSize: valueSize, NCPU: ncpu}
}

func (r *RawEntries) Len() int {
	if r.KeySize == 0 { // a ring buffer
		return 0
	}
	return len(r.keys) / r.KeySize
}

func (r *RawEntries) Key(i int) []byte { return r.keys[i*r.KeySize : (i+1)*r.KeySize] }

// Value is entry i's Value of one CPU (cpu 0 for other maps).
func (r *RawEntries) Value(i, cpu int) []byte {
	off := (i*r.NCPU + cpu) * r.ValueSize
	return r.values[off : off+r.ValueSize]
}

// Entry is Entry i's values of every CPU, back to back.
func (r *RawEntries) Entry(i int) []byte {
	return r.values[i*r.NCPU*r.ValueSize : (i+1)*r.NCPU*r.ValueSize]
}

// Add appends an entry; vals holds ncpu values back to back.
func (r *RawEntries) Add(k, vals []byte) {
	r.keys = append(r.keys, k...)
	r.values = append(r.values, vals...)
}

// MapCPUs is the number of values one entry of m holds: the possible CPUs
// for a per-CPU map, else 1.
func MapCPUs(m *ebpf.Map) (int, error) {
	if perCPU(m) {
		return ebpf.PossibleCPU()
	}
	return 1, nil
}

// perCPU reports whether m holds one value per possible CPU.
func perCPU(m *ebpf.Map) bool {
	switch m.Type() {
	case ebpf.PerCPUArray, ebpf.PerCPUHash, ebpf.LRUCPUHash:
		return true
	}
	return false
}

// batchable reports whether entries of a map of type t are read and written
// with BPF_MAP_*_BATCH when the host allows it.
func batchable(t ebpf.MapType) bool {
	switch t {
	case ebpf.Hash, ebpf.Array, ebpf.PerCPUArray, ebpf.PerCPUHash:
		return true
	}
	return false
}

// RawChunk is how many entries one batch command moves.
const RawChunk = 4096

// byteArrays returns a slice of n arrays of size bytes, made at run time
// so that cilium/ebpf encodes it without copying, and the same memory as
// one byte slice.
func byteArrays(size, n int) (any, []byte) {
	v := reflect.MakeSlice(reflect.SliceOf(reflect.ArrayOf(size, reflect.TypeFor[byte]())), n, n)
	if n == 0 {
		return v.Interface(), nil
	}
	return v.Interface(), unsafe.Slice((*byte)(v.UnsafePointer()), size*n)
}

// DumpMap reads every entry of m: with BPF_MAP_LOOKUP_BATCH where batch
// says so and the map type allows it, else key by key. An array map
// yields all of its keys. A concurrent writer may change entries during
// the read; each entry is read whole.
func DumpMap(m *ebpf.Map, batch bool) (*RawEntries, error) {
	ncpu, err := MapCPUs(m)
	if err != nil {
		return nil, err
	}
	r := NewRawEntries(int(m.KeySize()), int(m.ValueSize()), ncpu)
	if m.Type() == ebpf.RingBuf {
		return r, nil // no entries to read
	}
	if batch && batchable(m.Type()) {
		err := dumpBatch(m, r)
		if err == nil || !errors.Is(err, ebpf.ErrNotSupported) {
			return r, err
		}
		r = NewRawEntries(r.KeySize, r.ValueSize, ncpu)
	}
	return r, dumpPerKey(m, r)
}

func dumpBatch(m *ebpf.Map, r *RawEntries) error {
	keys, kb := byteArrays(r.KeySize, RawChunk)
	vals, vb := byteArrays(r.ValueSize, RawChunk*r.NCPU)
	var cursor ebpf.MapBatchCursor
	for {
		n, err := m.BatchLookup(&cursor, keys, vals, nil)
		if n > 0 {
			r.Add(kb[:n*r.KeySize], vb[:n*r.NCPU*r.ValueSize])
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("batch read %s: %w", m, err)
		}
	}
}

func dumpPerKey(m *ebpf.Map, r *RawEntries) error {
	var k []byte
	if perCPU(m) {
		var per [][]byte
		it := m.Iterate()
		for it.Next(&k, &per) {
			r.keys = append(r.keys, k...)
			for _, v := range per {
				r.values = append(r.values, v...)
			}
		}
		return iterError(m, it.Err())
	}
	var v []byte
	it := m.Iterate()
	for it.Next(&k, &v) {
		r.Add(k, v)
	}
	return iterError(m, it.Err())
}

func iterError(m *ebpf.Map, err error) error {
	if err != nil {
		return fmt.Errorf("read %s: %w", m, err)
	}
	return nil
}

// WriteEntries writes every entry of r into m (BPF_ANY): with
// BPF_MAP_UPDATE_BATCH where batch says so and the map type allows it,
// else one update per entry. The sizes of r must be m's. It returns the
// first failure, naming the entry count written before it.
func WriteEntries(m *ebpf.Map, r *RawEntries, batch bool) error {
	if r.KeySize != int(m.KeySize()) || r.ValueSize != int(m.ValueSize()) {
		return fmt.Errorf("write %s: entries of key/value size %d/%d, the map has %d/%d", m, r.KeySize, r.ValueSize, m.KeySize(), m.ValueSize())
	}
	n := r.Len()
	if batch && batchable(m.Type()) {
		done, err := writeBatch(m, r)
		if err == nil || !errors.Is(err, ebpf.ErrNotSupported) {
			return err
		}
		if done != 0 {
			return fmt.Errorf("write %s: %w", m, err)
		}
	}
	for i := range n {
		if err := putRaw(m, r, i, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("write %s: entry %d of %d: %w%s", m, i+1, n, err, fullHint(m, err))
		}
	}
	return nil
}

func writeBatch(m *ebpf.Map, r *RawEntries) (int, error) {
	n := r.Len()
	for done := 0; done < n; {
		c := min(RawChunk, n-done)
		keys, kb := byteArrays(r.KeySize, c)
		vals, vb := byteArrays(r.ValueSize, c*r.NCPU)
		copy(kb, r.keys[done*r.KeySize:])
		copy(vb, r.values[done*r.NCPU*r.ValueSize:])
		k, err := m.BatchUpdate(keys, vals, nil)
		if err != nil {
			return done, fmt.Errorf("write %s: %d of %d entries written: %w%s", m, done+k, n, err, fullHint(m, err))
		}
		done += c
	}
	return n, nil
}

// putRaw writes entry i of r into m with flags.
func putRaw(m *ebpf.Map, r *RawEntries, i int, flags ebpf.MapUpdateFlags) error {
	if !perCPU(m) {
		return m.Update(r.Key(i), r.Entry(i), flags)
	}
	per := make([][]byte, r.NCPU)
	for cpu := range per {
		per[cpu] = r.Value(i, cpu)
	}
	return m.Update(r.Key(i), per, flags)
}

// lookupRaw reads the entry under key k of m into one value per CPU back
// to back; ok is false when k has none.
func lookupRaw(m *ebpf.Map, k []byte) (vals []byte, ok bool, err error) {
	if !perCPU(m) {
		var v []byte
		err = m.Lookup(k, &v)
		vals = v
	} else {
		var per [][]byte
		err = m.Lookup(k, &per)
		for _, v := range per {
			vals = append(vals, v...)
		}
	}
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil, false, nil
	}
	return vals, err == nil, err
}

// fullHint explains E2BIG from a hash map: more entries than max_entries.
func fullHint(m *ebpf.Map, err error) string {
	if errors.Is(err, unix.E2BIG) {
		return fmt.Sprintf(" (the map holds at most %d entries)", m.MaxEntries())
	}
	return ""
}
