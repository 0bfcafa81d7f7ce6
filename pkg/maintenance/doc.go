// Package maintenance is XLB's cleanup loop over the flow map (DESIGN §5;
// seed "Orderly close and reset" and "Inactive connection cleanup") and
// the sample it publishes once per cycle for the status API and metrics.
//
// # What removes a pair, and when
//
//   - A pair that saw both FINs is removed 60 s after the second FIN
//     (TimeWait). The data path stamps the moment on the forward entry
//     and posts a close event; the loop keeps the pair in a time-ordered
//     schedule and asks for its removal when the 60 s are up.
//   - A pair that saw a RST is removed by the next cycle: its close event
//     is read and the removal asked for in the same cycle.
//   - A pair that saw no packet in either direction for the orphan TTL
//     (orphan_ttl_secs) is removed as orphaned.
//   - A lone entry (its counterpart missing or of another generation) is
//     removed as an invariant repair when a second look, a cycle after the
//     first, still finds it lone. A packet on a lone entry that was idle
//     for dataplane.LoneCheckTicks reports it (a dataplane.CloseLone
//     event); an idle lone entry is found by the walk once idle for the
//     orphan TTL.
//
// Close events need no walk. Orphans and idle lone entries only a walk
// can find: the loop reads a slice of the flow map each cycle and resumes
// there on the next, sized so that every entry is visited at least once
// every OrphanTTL/10 (30 s with the default TTL). The walk also catches
// terminal pairs whose close event was lost (a full ring buffer, an
// overwritten queue slot, a restart), at most one pass late. The walk
// sends the reaper only what it would remove (or, for idle reverse
// entries, check): a steady table costs one batch read per slice and no
// lookups.
//
// # Deletes are re-checked in the kernel
//
// The loop decides; the reaper removes. Every removal is a request to the
// reaper, an XDP program that the loop runs with BPF_PROG_TEST_RUN
// (dataplane.Reap). It looks up the entry again, compares the generation,
// the close state and both entries' last-seen times with the rule it is
// asked to apply, and only then deletes the forward entry and its
// counterpart, in one run. A packet that arrives after the loop's decision
// (an ACK refreshing an idle pair, a SYN that replaced a terminal pair)
// keeps its pair: the check and the delete are nanoseconds apart, not a
// system call or a whole walk. The reaper counts what it removed per
// backend, and the data path counts pairs opened, closed and replaced per
// backend, so the gauges (active, time-wait, resetting, per backend) are
// differences of counters, not a recount of the table.
//
// # Why this shape, and the fallbacks
//
// Calico's conntrack cleaner walks its table in the kernel with
// bpf_for_each_map_elem from a program run through BPF_PROG_TEST_RUN; Cilium
// dumps its tables to userspace with batch lookups. XLB takes the walk from
// Cilium and the re-checked delete from Calico:
//
//   - bpf_for_each_map_elem cannot start in the middle of a map: every run
//     visits all 2 × N entries, so a walk spread over cycles still costs
//     O(N) per cycle, and one run over millions of entries keeps a CPU in
//     the kernel, away from its packets, for tens of milliseconds. A batch
//     lookup cursor resumes where it stopped, so a cycle reads only its
//     slice. The kernel feature stays probed and reported
//     (dataplane.FeatureForEachMapElem, path not_used).
//   - The delete must not trust a decision taken from a copy of the entry,
//     so the re-check runs next to the data path, in the kernel. The
//     reaper needs nothing the data path does not already need
//     (BPF_PROG_TEST_RUN for the clock, bpf_loop for SNAT probing), so it
//     has no fallback of its own.
//
// Where the host refuses batch map operations the walk reads key by key
// (dataplane.PathPerKey). Where it refuses ring buffers the data path posts
// close events to per-CPU queues instead (dataplane.PathPerCPUQueue), which
// the loop drains the same way. Both fallbacks keep every rule above.
//
// Time is the data path's clock (jiffies) read through a Clock, so tests
// can move it instead of sleeping for minutes. Only this package removes
// flow entries (through the reaper).
package maintenance
