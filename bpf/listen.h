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
 * Find the listen port mapping for dport; returns the remote port or 0.
 * Each mapping is read with one 32-bit load (local port in the low half on
 * this little-endian target) so the result is a value, not a pointer whose
 * offset depends on the matching iteration: without CAP_PERFMON the
 * verifier refuses such an offset.
 */
static __always_inline __be16 remote_port_for(struct xlb_config *cfg, __be16 dport)
{
	__u32 w;
	int i;

#pragma unroll
	for (i = 0; i < XLB_MAX_PORTS; i++) {
		if (i >= cfg->nports)
			break;
		w = *(__u32 *)&cfg->ports[i];
		if ((__be16)w == dport)
			return (__be16)(w >> 16);
	}
	return 0;
}

#endif
