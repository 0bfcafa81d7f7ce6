package dataplane

import (
	"errors"
	"fmt"
	"reflect"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// rawEntries are entries of a map as bytes, in the sizes the kernel
// reports for the map, whatever layout built it: migrations read a
// predecessor's maps with them. Entry i is keys[i*keySize:] and, for each
// of the ncpu values (one per possible CPU for a per-CPU map, else one),
// values[(i*ncpu+cpu)*valueSize:].
type rawEntries struct {
	keySize, valueSize, ncpu int
	keys, values             []byte
}

func newRawEntries(keySize, valueSize, ncpu int) *rawEntries {
	return &rawEntries{keySize: keySize, valueSize: valueSize, ncpu: ncpu}
}

func (r *rawEntries) len() int {
	if r.keySize == 0 { // a ring buffer
		return 0
	}
	return len(r.keys) / r.keySize
}

func (r *rawEntries) key(i int) []byte { return r.keys[i*r.keySize : (i+1)*r.keySize] }

// value is entry i's value of one CPU (cpu 0 for other maps).
func (r *rawEntries) value(i, cpu int) []byte {
	off := (i*r.ncpu + cpu) * r.valueSize
	return r.values[off : off+r.valueSize]
}

// entry is entry i's values of every CPU, back to back.
func (r *rawEntries) entry(i int) []byte {
	return r.values[i*r.ncpu*r.valueSize : (i+1)*r.ncpu*r.valueSize]
}

// add appends an entry; vals holds ncpu values back to back.
func (r *rawEntries) add(k, vals []byte) {
	r.keys = append(r.keys, k...)
	r.values = append(r.values, vals...)
}

// mapCPUs is the number of values one entry of m holds: the possible CPUs
// for a per-CPU map, else 1.
func mapCPUs(m *ebpf.Map) (int, error) {
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

// rawChunk is how many entries one batch command moves.
const rawChunk = 4096

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

// dumpMap reads every entry of m: with BPF_MAP_LOOKUP_BATCH where batch
// says so and the map type allows it, else key by key. An array map
// yields all of its keys. A concurrent writer may change entries during
// the read; each entry is read whole.
func dumpMap(m *ebpf.Map, batch bool) (*rawEntries, error) {
	ncpu, err := mapCPUs(m)
	if err != nil {
		return nil, err
	}
	r := newRawEntries(int(m.KeySize()), int(m.ValueSize()), ncpu)
	if m.Type() == ebpf.RingBuf {
		return r, nil // no entries to read
	}
	if batch && batchable(m.Type()) {
		err := dumpBatch(m, r)
		if err == nil || !errors.Is(err, ebpf.ErrNotSupported) {
			return r, err
		}
		r = newRawEntries(r.keySize, r.valueSize, ncpu)
	}
	return r, dumpPerKey(m, r)
}

func dumpBatch(m *ebpf.Map, r *rawEntries) error {
	keys, kb := byteArrays(r.keySize, rawChunk)
	vals, vb := byteArrays(r.valueSize, rawChunk*r.ncpu)
	var cursor ebpf.MapBatchCursor
	for {
		n, err := m.BatchLookup(&cursor, keys, vals, nil)
		if n > 0 {
			r.add(kb[:n*r.keySize], vb[:n*r.ncpu*r.valueSize])
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("batch read %s: %w", m, err)
		}
	}
}

func dumpPerKey(m *ebpf.Map, r *rawEntries) error {
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
		r.add(k, v)
	}
	return iterError(m, it.Err())
}

func iterError(m *ebpf.Map, err error) error {
	if err != nil {
		return fmt.Errorf("read %s: %w", m, err)
	}
	return nil
}

// writeEntries writes every entry of r into m (BPF_ANY): with
// BPF_MAP_UPDATE_BATCH where batch says so and the map type allows it,
// else one update per entry. The sizes of r must be m's. It returns the
// first failure, naming the entry count written before it.
func writeEntries(m *ebpf.Map, r *rawEntries, batch bool) error {
	if r.keySize != int(m.KeySize()) || r.valueSize != int(m.ValueSize()) {
		return fmt.Errorf("write %s: entries of key/value size %d/%d, the map has %d/%d", m, r.keySize, r.valueSize, m.KeySize(), m.ValueSize())
	}
	n := r.len()
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

func writeBatch(m *ebpf.Map, r *rawEntries) (int, error) {
	n := r.len()
	for done := 0; done < n; {
		c := min(rawChunk, n-done)
		keys, kb := byteArrays(r.keySize, c)
		vals, vb := byteArrays(r.valueSize, c*r.ncpu)
		copy(kb, r.keys[done*r.keySize:])
		copy(vb, r.values[done*r.ncpu*r.valueSize:])
		k, err := m.BatchUpdate(keys, vals, nil)
		if err != nil {
			return done, fmt.Errorf("write %s: %d of %d entries written: %w%s", m, done+k, n, err, fullHint(m, err))
		}
		done += c
	}
	return n, nil
}

// putRaw writes entry i of r into m with flags.
func putRaw(m *ebpf.Map, r *rawEntries, i int, flags ebpf.MapUpdateFlags) error {
	if !perCPU(m) {
		return m.Update(r.key(i), r.entry(i), flags)
	}
	per := make([][]byte, r.ncpu)
	for cpu := range per {
		per[cpu] = r.value(i, cpu)
	}
	return m.Update(r.key(i), per, flags)
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
