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
//   - A pair whose handshake never completed (the client never ACKed the
//     backend's SYN-ACK: no dataplane.FlagEstablished) is removed
//     embryonic_ttl_secs after its SYN (EmbryonicTTL, default 10 s),
//     whatever it saw meanwhile (DESIGN §6b, issue 13): packets do not
//     refresh an embryonic pair, so its forward entry's last-seen time is
//     the SYN's. The data path posts a dataplane.CloseOpen event for every
//     new pair; the loop keeps it in a schedule and asks for the pair's
//     removal at the deadline. The reaper removes it only if it is still
//     live and not established; an established, closed or replaced pair
//     is left alone and the entry dropped. Removals are counted per
//     backend (dataplane.ReapedCounts.Embryonic) and leave the active
//     gauge (Sample.EmbryonicExpired).
//   - The reverse entry of a pair whose backend closed first outlives the
//     pair as a held entry (dataplane.FlagHold) that keeps the SNAT port
//     until SNATHold after the pair's close (70 s: the backend's TIME_WAIT
//     socket may outlive 60 s by the kernel timer wheel's rounding), then
//     is removed. It is left when the pair's time-wait ends (the reaper
//     removes the forward entry and holds the reverse one) or when the
//     client reuses its port and a new SYN replaces the pair. Either
//     posts a dataplane.CloseHold event with the close time; the loop
//     schedules the removal like a time-wait. A held entry is lone on
//     purpose: it is never checked or repaired as lone, and it counts in
//     no pair gauge (its pair was counted when it left).
//   - A pair that saw no packet in either direction for the orphan TTL
//     (orphan_ttl_secs) is removed as orphaned.
//   - A UDP pair (dataplane.FlagUDP; issue 31) is removed once idle for
//     flow_table.udp_timeout_secs (UDPTimeout, 30 s) while the backend
//     never answered, or for udp_stream_timeout_secs (UDPStreamTimeout,
//     120 s) after the later of its two entries' last datagrams once it
//     did (dataplane.FlagUDPReplied). Its dataplane.CloseOpen event puts
//     one dataplane.ReapUDP request into the udp schedule, due UDPTimeout
//     after the first datagram. The reaper re-checks the pair: not due,
//     it answers KEPT with the moment the pair falls due as it stands
//     (ReapRequest.Next), and the request goes back into the schedule
//     there, so every live UDP pair has one request waiting and leaves
//     within a cycle of its deadline. The schedules live in memory: the
//     first walk pass of a new loop (a restart, a hot upgrade) adopts the
//     UDP pairs no event scheduled.
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
// per pass length, the shorter of OrphanTTL/10 and EmbryonicTTL (10 s
// with the defaults). The walk applies every rule above on its own, so it
// also catches pairs whose event was lost (a full ring buffer, an
// overwritten queue slot, a restart): a terminal pair or a held entry at
// most one pass late, and an embryonic pair whose dataplane.CloseOpen was
// lost (the ring buffer full during a SYN flood) within one more
// EmbryonicTTL, which is why a pass is never longer than that; a UDP pair
// whose event was lost gets a ReapUDP from the walk once idle for its
// timeout, not rescheduled when kept (the walk comes back). The walk
// sends the reaper only what it would remove (or, for idle reverse
// entries, check): a steady table costs one batch read per slice and no
// lookups.
//
// # Bounded schedules
//
// Each rule with a deadline (time-wait, embryonic, hold, udp) keeps its
// events in a schedule: a FIFO, since events arrive nearly in time order
// and every deadline of a rule is the event's time plus the same
// duration, with a heap for the few that arrive out of order (and for
// the udp schedule's rescheduled requests, whose deadlines the pairs'
// traffic decides). A schedule holds at
// most one request per pair the flow map can hold (per entry, for holds),
// so its memory is bounded by the table's size whatever the event rate: a
// SYN flood fills the table, and every pair in it has at most one entry
// in the embryonic schedule. An event that finds its schedule full is
// counted (CloseEvents.Unscheduled) and left to the walk.
//
// # Next hops no entry names
//
// Entries name a slot of the data path's next-hop table
// (FlowValue.Nexthop). With Options.NextHopGC the walk collects, over a
// whole pass, the slot of every entry it reads into a bitset; at the end
// of the pass (at most once per pass length) the hook gets the bitset and
// the clock when the pass began. The data path stamps a slot when a new
// pair names it, so a slot neither in the bitset nor used since then is
// named by no entry and may be freed (dataplane.FreeNextHops); a packet
// whose slot was freed looks its next hop up again.
//
// # Deletes are re-checked in the kernel
//
// The loop decides; the reaper removes. Every removal is a request to the
// reaper, an XDP program that the loop runs with BPF_PROG_TEST_RUN
// (dataplane.Reap). It looks up the entry again, compares the generation,
// the close state and both entries' last-seen times with the rule it is
// asked to apply, and only then deletes the forward entry and its
// counterpart (a held entry alone), in one run. A packet that arrives after the loop's decision
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
