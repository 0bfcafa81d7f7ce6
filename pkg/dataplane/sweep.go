package dataplane

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// SweepCells is the number of lone-detection cells (a power of two).
const SweepCells = 1 << 12

// SweepParams are the thresholds of one maintenance sweep, in jiffies.
type SweepParams struct {
	Now      Jiffies
	Orphan   Jiffies // orphan_ttl
	TimeWait Jiffies // 60 s
}

// Sweep record kinds, bits of SweepRecord.Kind (one record per entry).
const (
	SweepTimeWait = uint32(xlbSweepKindXLB_SWEEP_TIMEWAIT) // both FINs and the time-wait is over
	SweepReset    = uint32(xlbSweepKindXLB_SWEEP_RESET)    // a RST was seen (every such pair)
	SweepOrphan   = uint32(xlbSweepKindXLB_SWEEP_ORPHAN)   // both directions idle for the orphan TTL
	SweepExact    = uint32(xlbSweepKindXLB_SWEEP_EXACT)    // an entry of a suspect cell
)

// SweepRecord is one entry the sweep asks the maintenance loop to look at:
// its key, its counterpart's key, generation, backend id and why.
type SweepRecord = xlbSweepRec

// SweepCell is the XOR accumulator of one lone-detection cell: an intact
// pair cancels out (bpf/layout.h struct sweep_cell).
type SweepCell = xlbSweepCell

// SweepBackend counts one backend's pairs.
type SweepBackend = xlbSweepBackend

// SweepResult is what one sweep saw. Backends is indexed by backend id.
type SweepResult struct {
	Entries, Active, TimeWait, Resetting uint64
	Records                              []SweepRecord
	Cells                                []SweepCell
	Backends                             []SweepBackend
}

// Sweep visits every flow entry once with the xlb_sweep iterator program:
// the kernel tallies pairs per backend, folds every entry into its
// lone-detection cell and returns only the entries to act on (expired
// time-wait, RST, orphaned, and every entry of a cell flagged in suspect).
// Like a batch read it is not a snapshot. Not safe for concurrent use
// (one maintenance loop per data path).
func (d *Dataplane) Sweep(p SweepParams, suspect *[SweepCells / 64]uint64, res *SweepResult) error {
	if err := d.sweepSetup(); err != nil {
		return err
	}
	o := &d.objs
	params := xlbSweepParams{Now: uint64(p.Now), OrphanTicks: uint64(p.Orphan), TimewaitTicks: uint64(p.TimeWait)}
	if err := o.XlbSweepParams.Update(uint32(0), &params, 0); err != nil {
		return fmt.Errorf("dataplane: sweep params: %w", err)
	}
	if err := o.XlbSweepTotals.Update(uint32(0), &xlbSweepTotals{}, 0); err != nil {
		return fmt.Errorf("dataplane: sweep totals: %w", err)
	}
	if _, err := o.XlbSweepSuspect.BatchUpdate(d.sweep.words, suspect[:], nil); err != nil {
		return fmt.Errorf("dataplane: sweep suspects: %w", err)
	}
	if _, err := o.XlbSweepCells.BatchUpdate(d.sweep.cellKeys, d.sweep.zeroCells, nil); err != nil {
		return fmt.Errorf("dataplane: sweep cells: %w", err)
	}
	if _, err := o.XlbSweepBackends.BatchUpdate(d.sweep.backendKeys, d.sweep.zeroBackends, nil); err != nil {
		return fmt.Errorf("dataplane: sweep backends: %w", err)
	}

	rd, err := d.sweep.iter.Open()
	if err != nil {
		return fmt.Errorf("dataplane: sweep: %w", err)
	}
	res.Records = res.Records[:0]
	br := bufio.NewReaderSize(retryEAGAIN{rd}, 64<<10)
	var rec SweepRecord
	buf := unsafe.Slice((*byte)(unsafe.Pointer(&rec)), unsafe.Sizeof(rec))
	for {
		if _, err := io.ReadFull(br, buf); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			rd.Close()
			return fmt.Errorf("dataplane: sweep: read: %w", err)
		}
		res.Records = append(res.Records, rec)
	}
	if err := rd.Close(); err != nil {
		return fmt.Errorf("dataplane: sweep: %w", err)
	}

	var tot xlbSweepTotals
	if err := o.XlbSweepTotals.Lookup(uint32(0), &tot); err != nil {
		return fmt.Errorf("dataplane: sweep totals: %w", err)
	}
	if int(tot.Records) != len(res.Records) {
		return fmt.Errorf("dataplane: sweep emitted %d records, read %d", tot.Records, len(res.Records))
	}
	res.Entries, res.Active, res.TimeWait, res.Resetting = tot.Entries, tot.Active, tot.Timewait, tot.Resetting
	if len(res.Cells) != SweepCells {
		res.Cells = make([]SweepCell, SweepCells)
	}
	if len(res.Backends) != MaxBackends {
		res.Backends = make([]SweepBackend, MaxBackends)
	}
	if err := lookupAll(o.XlbSweepCells, d.sweep.cellKeys, res.Cells); err != nil {
		return fmt.Errorf("dataplane: sweep cells: %w", err)
	}
	if err := lookupAll(o.XlbSweepBackends, d.sweep.backendKeys, res.Backends); err != nil {
		return fmt.Errorf("dataplane: sweep backends: %w", err)
	}
	return nil
}

// retryEAGAIN reads an iterator: the kernel ends a read() with EAGAIN after
// visiting a million entries without output (MAX_ITER_OBJECTS, so one call
// never runs unbounded); reading again continues where it stopped.
type retryEAGAIN struct{ r io.Reader }

func (r retryEAGAIN) Read(p []byte) (int, error) {
	for {
		n, err := r.r.Read(p)
		if n == 0 && errors.Is(err, unix.EAGAIN) {
			continue
		}
		return n, err
	}
}

// lookupAll reads an array map whole with one batch lookup.
func lookupAll[V any](m *ebpf.Map, keys []uint32, out []V) error {
	var cursor ebpf.MapBatchCursor
	n, err := m.BatchLookup(&cursor, keys, out, nil)
	if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return err
	}
	if n != len(out) {
		return fmt.Errorf("read %d of %d elements", n, len(out))
	}
	return nil
}

// sweepState is the iterator link and the reusable buffers of Sweep.
type sweepState struct {
	iter         *link.Iter
	words        []uint32
	cellKeys     []uint32
	backendKeys  []uint32
	zeroCells    []SweepCell
	zeroBackends []SweepBackend
}

func (d *Dataplane) sweepSetup() error {
	if d.sweep.iter != nil {
		return nil
	}
	it, err := link.AttachIter(link.IterOptions{Program: d.objs.XlbSweep, Map: d.objs.XlbFlows})
	if err != nil {
		return fmt.Errorf("dataplane: attach the sweep iterator: %w", err)
	}
	keys := func(n int) []uint32 {
		k := make([]uint32, n)
		for i := range k {
			k[i] = uint32(i)
		}
		return k
	}
	d.sweep = sweepState{
		iter: it, words: keys(SweepCells / 64), cellKeys: keys(SweepCells), backendKeys: keys(MaxBackends),
		zeroCells: make([]SweepCell, SweepCells), zeroBackends: make([]SweepBackend, MaxBackends),
	}
	return nil
}
