package maintenance

import (
	"context"
	"fmt"
	"math"

	"github.com/xlbproject/xlb/pkg/dataplane"
)

// walkChunk is the most entries one read of the walk returns (one
// BPF_MAP_LOOKUP_BATCH call, 64 bytes an entry).
const walkChunk = 4096

// minSlice is the fewest entries a cycle's walk reads (unless a pass ends
// first): a small table is walked whole every cycle or two.
const minSlice = 1024

// WalkStatus describes the incremental walk as of one sample.
type WalkStatus struct {
	// Passes counts complete passes over the flow map since the loop started.
	Passes uint64
	// Visited is the number of entries the current pass has read so far.
	Visited uint64
	// LastPassEntries is the number of entries the last complete pass read.
	LastPassEntries uint64
	// LastPassCycles is the number of cycles the last complete pass took.
	LastPassCycles uint64
	// PassCycles is the number of cycles a pass may take: every entry is
	// visited at least once per PassCycles cycles (the shorter of
	// OrphanTTL/10 and EmbryonicTTL, over the interval).
	PassCycles uint64
}

// walk is the loop's resumable pass over the flow map.
type walk struct {
	fw         *dataplane.FlowWalk
	passCycles uint64 // cycles a pass may take
	cycles     uint64 // cycles the current pass has taken, this one included
	status     WalkStatus
	refs       *nextHopRefs // next-hop slots the entries name; nil without Options.NextHopGC
}

// newWalk prepares the walk; with refs it collects the next-hop slots of
// every entry it reads.
func newWalk(dp *dataplane.Dataplane, passCycles uint64, refs *nextHopRefs) *walk {
	passCycles = max(1, passCycles)
	return &walk{fw: dp.NewFlowWalk(walkChunk), passCycles: passCycles, status: WalkStatus{PassCycles: passCycles}, refs: refs}
}

// quota is how many entries this cycle reads so that the pass ends within
// its cycles, given an estimate of the entries in the map. The pass's last
// allowed cycle reads to the end whatever the estimate said.
func (w *walk) quota(estimate uint64) uint64 {
	if w.cycles >= w.passCycles {
		return math.MaxUint64
	}
	left := uint64(0)
	if estimate > w.status.Visited {
		left = estimate - w.status.Visited
	}
	cyclesLeft := uint64(1)
	if w.passCycles > w.cycles {
		cyclesLeft = w.passCycles - w.cycles
	}
	return max(minSlice, (left+cyclesLeft-1)/cyclesLeft)
}

// step reads this cycle's slice (now is the cycle's clock) and calls visit
// for each entry. The pass may end within the slice; the rest of the slice
// is not read (the next pass starts next cycle).
func (w *walk) step(ctx context.Context, now dataplane.Jiffies, estimate uint64, visit func(*dataplane.FlowKey, *dataplane.FlowValue)) error {
	if w.refs != nil {
		if w.cycles == 0 {
			w.refs.begin(now)
		}
		w.refs.cycles++
	}
	w.cycles++
	q := w.quota(estimate)
	read := uint64(0)
	for read < q {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, end, err := w.fw.Next()
		if err != nil {
			return fmt.Errorf("maintenance: walk: %w", err)
		}
		for i := range n {
			if w.refs != nil {
				w.refs.mark(w.fw.Values[i].Nexthop)
			}
			visit(&w.fw.Keys[i], &w.fw.Values[i])
		}
		read += uint64(n)
		w.status.Visited += uint64(n)
		if end {
			w.status.Passes++
			w.status.LastPassEntries, w.status.LastPassCycles = w.status.Visited, w.cycles
			w.status.Visited, w.cycles = 0, 0
			if w.refs != nil && w.refs.cycles >= w.passCycles {
				w.refs.ready = true
			}
			return nil
		}
	}
	return nil
}
