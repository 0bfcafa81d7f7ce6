/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * layout.h — every map key and value shared between the XDP program and Go.
 *
 * bpf2go generates the Go types from the BTF of these structs, so a field
 * added here appears in pkg/dataplane after `make generate`. Keep every
 * struct free of implicit padding (explicit pad fields, zeroed by writers):
 * flow keys are hashed byte for byte.
 *
 * Byte order: fields named *_be are network byte order; everything else is
 * host byte order.
 */
#ifndef XLB_LAYOUT_H
#define XLB_LAYOUT_H

#include <linux/types.h>

/* Layout version of the pinned maps; bump when a key or value changes. */
#define XLB_LAYOUT_VERSION 1

#define XLB_MAX_PORTS 8        /* port mappings per listen address (DESIGN §1) */
#define XLB_MAX_BACKENDS 1024  /* backend ids 0..1023; routable set size limit */
#define XLB_SNAT_MAX_TRIES 32  /* bounded SNAT port probes per new pair */

/* Flow direction, part of the flow key. */
enum xlb_dir {
	XLB_DIR_CLIENT = 0,  /* client -> listen:local_port (forward entry) */
	XLB_DIR_BACKEND = 1, /* backend:remote_port -> snat_ip:snat_port (reverse entry) */
};

/* Exact 5-tuple plus direction as seen on the wire, before any rewrite. */
struct flow_key {
	__be32 saddr_be;
	__be32 daddr_be;
	__be16 sport_be;
	__be16 dport_be;
	__u8 proto;
	__u8 dir;      /* enum xlb_dir */
	__u8 pad[2];   /* always zero */
};

/*
 * Close state. The pair-wide bits (FIN_*, RST_*, CLOSED, INIT_BACKEND) live on
 * the forward (XLB_DIR_CLIENT) entry only; the data path updates them with
 * atomic OR so concurrent FINs on two CPUs count the connection exactly once.
 */
enum xlb_flow_flags {
	XLB_F_FIN_CLIENT = 1 << 0,   /* client sent FIN */
	XLB_F_FIN_BACKEND = 1 << 1,  /* backend sent FIN */
	XLB_F_RST_CLIENT = 1 << 2,   /* client sent RST */
	XLB_F_RST_BACKEND = 1 << 3,  /* backend sent RST */
	XLB_F_INIT_BACKEND = 1 << 4, /* the first FIN/RST came from the backend */
};

/*
 * One directional entry: the rewrite recipe for packets matching its key, plus
 * state. 96 bytes.
 */
struct flow_value {
	/* recipe: the packet leaves with these addresses and ports */
	__be32 saddr_be;
	__be32 daddr_be;
	__be16 sport_be;
	__be16 dport_be;
	__u8 smac[6];
	__u8 dmac[6];
	__u32 ifindex;     /* egress interface (bpf_fib_lookup at pair creation) */
	__u32 csum_ip;     /* folded one's complement delta for the IPv4 header */
	__u32 csum_l4;     /* folded delta for the TCP checksum (pseudo header + ports) */
	/* pair */
	__u32 backend_id;
	__u32 generation;  /* same on both entries of a pair; never 0 */
	__u32 flags;       /* enum xlb_flow_flags (forward entry only) */
	struct flow_key peer; /* key of the counterpart entry */
	/* state; times are jiffies (bpf_jiffies64) */
	__u64 last_seen;    /* last packet forwarded in this direction */
	__u64 closed_at;    /* forward entry: when the pair became terminal */
	__u64 packets;      /* best effort: updated without atomics */
	__u64 bytes;        /* IPv4 bytes (tot_len) as received */
};

struct port_map {
	__be16 local_port_be;
	__be16 remote_port_be;
};

enum xlb_cfg_flags {
	XLB_CFG_SHUTDOWN = 1 << 0, /* answer matching packets with RST (seed: shutdown) */
};

/* The single entry of the config map. Written by userspace only. */
struct xlb_config {
	__be32 listen_ip_be;
	__be32 snat_ip_be;
	__u16 snat_port_lo;   /* host order, inclusive */
	__u16 snat_port_hi;   /* host order, inclusive */
	__u32 nports;
	struct port_map ports[XLB_MAX_PORTS];
	__u32 flags;          /* enum xlb_cfg_flags */
	__u32 active_set;     /* 0 or 1: which backend_set slot is live */
};

struct backend_ref {
	__be32 ip_be;
	__u32 id;
};

/* The routable set, double buffered: userspace fills the inactive slot, then flips config.active_set. */
struct backend_set {
	__u32 count;
	__u32 pad;
	struct backend_ref entries[XLB_MAX_BACKENDS];
};

/* Shared mutable state, updated with atomics by the data path. */
struct xlb_state {
	__u64 rr;            /* round-robin position */
	__u64 generation;    /* last pair generation handed out */
	__u64 clock_jiffies; /* written by xlb_clock: jiffies ... */
	__u64 clock_ns;      /* ... and CLOCK_MONOTONIC ns at the same instant */
};

/*
 * Per-backend per-CPU counters, one slot per direction, indexed by
 * backend id * 2 + enum xlb_dir. The data path adds to its direction's slot
 * without branching on the direction: the verifier refuses a pointer offset
 * that depends on the path taken unless the loader holds CAP_PERFMON, and
 * XLB loads with CAP_BPF alone.
 */
#define XLB_BACKEND_STATS_SLOTS (2 * XLB_MAX_BACKENDS)

struct backend_stats {
	__u64 packets; /* as forwarded in this slot's direction */
	__u64 bytes;
	__u64 opened;  /* pairs created (XLB_DIR_CLIENT slot only) */
};

/* Per-CPU global counters (index into the counters map). */
enum xlb_counter {
	XLB_C_XDP_ABORTED = 0, /* XDP action counts, indexed by action */
	XLB_C_XDP_DROP = 1,
	XLB_C_XDP_PASS = 2,
	XLB_C_XDP_TX = 3,
	XLB_C_XDP_REDIRECT = 4,
	XLB_C_PAIRS_CREATED,
	XLB_C_SNAT_EXHAUSTED,
	XLB_C_TABLE_FULL,
	XLB_C_NO_BACKEND,       /* SYN with an empty routable set (RST) */
	XLB_C_FIB_MISS,         /* SYN dropped: backend next hop unresolved */
	XLB_C_SYN_REUSED,       /* retransmitted SYN on a live pair */
	XLB_C_PAIRS_REPLACED,   /* SYN met a terminal pair and replaced it */
	XLB_C_INVARIANT,        /* FIN/RST on an entry whose counterpart is missing */
	XLB_C_CLOSED_CLIENT_FIN,
	XLB_C_CLOSED_BACKEND_FIN,
	XLB_C_CLOSED_CLIENT_RST,
	XLB_C_CLOSED_BACKEND_RST,
	XLB_C_SHUTDOWN_RESETS,
	XLB_C_TTL_EXCEEDED,     /* passed to the stack for ICMP time exceeded */
	XLB_C_MAX,
};

#endif
