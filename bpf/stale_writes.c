// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * stale_writes.c — a test program, not part of XLB's object: it plays the
 * two CPUs of a stale entry pointer (flow.h, "stale pointers") in one run,
 * so that pkg/dataplane/stalewrites checks flow.h's guarded writes
 * against the kernel's real preallocated hash map. The sender looks pair
 * 1's entry up and reads its generation; the replacer deletes pair 1 and
 * inserts pair 2, which gets pair 1's freed element; then the sender
 * writes through its old pointer, guarded (flow_set, flow_is) or, to
 * show what the guard prevents, with a plain atomic OR and store.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "layout.h"
#include "flow.h"

char __license[] SEC("license") = "Dual BSD/GPL";

/* Pair 1 at key {saddr 1}, pair 2 at key {saddr 2}; preallocated, as xlb_flows. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct flow_key);
	__type(value, struct flow_value);
	__uint(max_entries, 64);
} flows SEC(".maps");

/* Pair 2's value as the replacer inserts it (written by the test). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct flow_value);
	__uint(max_entries, 1);
} fresh SEC(".maps");

/* What the sender's guarded flag write returned (flow_set). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __s64);
	__uint(max_entries, 1);
} set_result SEC(".maps");

enum stale_result {
	STALE_FAILED = 0,     /* a lookup, delete or insert failed */
	STALE_OTHER_ELEMENT,  /* pair 2 did not get pair 1's element: nothing shown */
	STALE_WRITTEN,        /* the sender's writes went through its old pointer */
};

/* The written values: what the sender would set on pair 1. */
#define STALE_FLAGS (XLB_F_CLOSED_RST | XLB_F_RST_CLIENT | XLB_F_PORT_FREED)
#define STALE_LAST_SEEN 0xdead

static __always_inline int replace(struct flow_value **v, __u32 *gen)
{
	struct flow_key k1 = {}, k2 = {};
	struct flow_value *f, *now;
	__u32 zero = 0;

	k1.saddr_be = 1;
	k2.saddr_be = 2;
	f = bpf_map_lookup_elem(&fresh, &zero);
	*v = bpf_map_lookup_elem(&flows, &k1);
	if (!f || !*v)
		return STALE_FAILED;
	*gen = flow_gen(*v);
	if (bpf_map_delete_elem(&flows, &k1) || bpf_map_update_elem(&flows, &k2, f, BPF_NOEXIST))
		return STALE_FAILED;
	now = bpf_map_lookup_elem(&flows, &k2);
	return now == *v ? STALE_WRITTEN : STALE_OTHER_ELEMENT;
}

/* The sender writes as the data path does: flow_set, and flow_is before a store. */
SEC("xdp")
int guarded(struct xdp_md *ctx)
{
	struct flow_value *v;
	__u32 gen, zero = 0;
	__s64 *res = bpf_map_lookup_elem(&set_result, &zero);
	int rc = replace(&v, &gen);

	if (rc != STALE_WRITTEN || !res)
		return rc;
	*res = flow_set(v, gen, STALE_FLAGS);
	if (flow_is(v, gen))
		v->last_seen = STALE_LAST_SEEN;
	return rc;
}

/* The sender writes with a plain atomic OR and store: what the guard prevents. */
SEC("xdp")
int unguarded(struct xdp_md *ctx)
{
	struct flow_value *v;
	__u32 gen;
	int rc = replace(&v, &gen);

	if (rc != STALE_WRITTEN)
		return rc;
	__sync_fetch_and_or(&v->flags, STALE_FLAGS);
	v->last_seen = STALE_LAST_SEEN;
	return rc;
}

/* flow_set on a live entry (pair 1, generation the test names): sets the bits, returns the flags before. */
SEC("xdp")
int live(struct xdp_md *ctx)
{
	struct flow_key k1 = {};
	struct flow_value *v;
	__u32 zero = 0;
	__s64 *res = bpf_map_lookup_elem(&set_result, &zero);

	k1.saddr_be = 1;
	v = bpf_map_lookup_elem(&flows, &k1);
	if (!v || !res)
		return STALE_FAILED;
	*res = flow_set(v, flow_gen(v), STALE_FLAGS);
	return STALE_WRITTEN;
}

const enum stale_result *__stale_result_btf __attribute__((unused));
