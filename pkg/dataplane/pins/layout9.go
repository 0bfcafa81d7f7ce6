package pins

// The step from layout 9 (issue 29: many services; the last build of it:
// release aa95f16) to layout 10 (issue 30: weighted round robin and
// Maglev). No struct of layout 9 changes its meaning or size. Map by map:
//
//   - xlb_sched is new (the schedules of the table schedulers, an array
//     of maps): it starts empty. Every service of layout 9 is round robin,
//     which reads no schedule, so nothing is lost.
//   - xlb_counters: enum xlb_counter gained XLB_C_SCHED_FALLBACK after
//     every counter layout 9 had: the copy as it is, the new one starting
//     at 0.
//   - struct service's scheduler byte and flags only gained values
//     (XLB_SCHED_WEIGHTED_RR, XLB_SCHED_MAGLEV, XLB_SVC_HASH_CLIENT_IP):
//     xlb_services is copied as it is.
//   - everything else is unchanged.
var layout9Step = Step{From: 9, Maps: map[string]Converter{}}
