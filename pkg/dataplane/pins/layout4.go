package pins

// The step from layout 4 (issue 14; the last build of it: commit 939478d)
// to layout 5 (the destination MAC check, bpf/ours.h). Map by map:
//
//   - xlb_counters: enum xlb_counter gained XLB_C_NOT_OURS after every
//     counter layout 4 had, so the array grew by one entry; each counter
//     keeps its index and the new one starts at 0.
//   - xlb_if_macs is new and never pinned: the successor writes it at
//     attach, before its program replaces the predecessor's.
//   - everything else is unchanged.
//
// No entry changes: the copy of every map as it is (layoutStep's default)
// is the whole conversion.
var layout4Step = Step{From: 4, Maps: map[string]Converter{}}
