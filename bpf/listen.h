/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * listen.h — the listen address's port mappings (DESIGN §1 ports): which
 * client packets are XLB's.
 */
#ifndef XLB_LISTEN_H
#define XLB_LISTEN_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "layout.h"

/*
 * The listen port mapping for dport: its 32-bit word (local port in the
 * low half, remote port in the high half, both network order), or 0 when
 * dport is not mapped. A mapping's local port is never 0, so a match is
 * never 0 even when its remote port is (each backend's own port). Each
 * mapping is read with one 32-bit load (the local port in the low half on
 * this little-endian target) so the result is a value, not a pointer
 * whose offset depends on the matching iteration: without CAP_PERFMON
 * the verifier refuses such an offset.
 */
static __always_inline __u32 port_mapping(struct xlb_config *cfg, __be16 dport)
{
	__u32 w;
	int i;

#pragma unroll
	for (i = 0; i < XLB_MAX_PORTS; i++) {
		if (i >= cfg->nports)
			break;
		w = *(__u32 *)&cfg->ports[i];
		if ((__be16)w == dport)
			return w;
	}
	return 0;
}

/* The remote port of a mapping port_mapping found (0: each backend's own). */
static __always_inline __be16 mapping_remote(__u32 mapping)
{
	return (__be16)(mapping >> 16);
}

#endif
