/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * events.h — close events (struct close_event) on their way to the
 * maintenance loop: the ring buffer, or the per-CPU queues where the host
 * refuses ring buffers (close_ring_on).
 */
#ifndef XLB_EVENTS_H
#define XLB_EVENTS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "layout.h"
#include "maps.h"
#include "counters.h"

/*
 * Post an event about the entry under key (generation gen, backend bid). A
 * full ring buffer loses the event (counted); the maintenance walk finds
 * the pair later. The per-CPU queue overwrites its oldest slot; the loop
 * notices from the head count.
 */
static __always_inline void post_event(const struct flow_key *key, __u32 gen, __u16 bid, __u16 kind, __u32 at)
{
	struct close_event ev;
	__u32 zero = 0, slot;
	struct close_event *e;
	__u64 *head;

	__builtin_memset(&ev, 0, sizeof(ev));
	ev.key = *key;
	ev.generation = gen;
	ev.time = at;
	ev.kind = kind;
	ev.backend_id = bid;
	if (close_ring_on) {
		if (bpf_ringbuf_output(&xlb_close_ring, &ev, sizeof(ev), BPF_RB_NO_WAKEUP))
			count(XLB_C_CLOSE_EVENTS_LOST);
		return;
	}
	head = bpf_map_lookup_elem(&xlb_close_head, &zero);
	if (!head)
		return;
	slot = (__u32)(*head % XLB_CLOSE_QUEUE_SLOTS);
	e = bpf_map_lookup_elem(&xlb_close_queue, &slot);
	if (!e)
		return;
	*e = ev;
	*head += 1;
}

#endif
