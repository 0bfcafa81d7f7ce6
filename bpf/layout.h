/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * layout.h — every map key and value shared between the XDP programs and
 * Go, and every size they are built with.
 *
 * bpf2go generates the Go types and constants from the BTF of these
 * structs and enums (pkg/dataplane/gen.go lists them with -type), so a
 * field or a limit added here appears in pkg/dataplane after `make
 * generate`; Go never spells a size or a struct again. Keep every struct
 * free of implicit padding (explicit pad fields, zeroed by writers): flow
 * keys are hashed byte for byte.
 *
 * Byte order: fields named *_be are network byte order; everything else is
 * host byte order.
 */
#ifndef XLB_LAYOUT_H
#define XLB_LAYOUT_H

#include <linux/bpf.h>
#include <linux/types.h>

/*
 * Pinned state (DESIGN §6): the maps, links and struct xlb_pin_meta that
 * pkg/dataplane pins under state_dir so that a successor (hot upgrade) or
 * a restart after a crash takes the running data path over.
 *
 * XLB_LAYOUT_VERSION is the version of this file's keys and values (and of
 * the set of maps in maps.h) as pinned maps hold them. The meta record
 * names it; a start adopts pins of its own version as they are. Bump it
 * when a key or value changes size, order or meaning, or a map is added
 * or removed -- cilium/ebpf's compatibility check of a pinned map compares
 * only types and sizes, so a same-size change would otherwise be adopted
 * and misread. A bump needs a migration from the previous version: a
 * converter per changed map in pkg/dataplane/migrate.go (layoutSteps,
 * keyed by the source version), so pins of every older version are still
 * copied entry by entry into the new maps.
 */
enum xlb_pin {
	XLB_PIN_MAGIC = 0x584c4250,  /* 'XLBP': the first field of struct xlb_pin_meta */
	XLB_LAYOUT_VERSION = 11,
};

/*
 * The pinned metadata record (state_dir/meta, a one-entry array): written
 * by userspace only, never read by the data path. magic and
 * layout_version come first, in every version, so that any version reads
 * them from any other version's record (a longer one included). The rest
 * changes only with a bump of XLB_LAYOUT_VERSION, which then also adds a
 * reader of the older record (pkg/dataplane/pins.go readPins). 72 bytes.
 */
struct xlb_pin_meta {
	__u32 magic;               /* XLB_PIN_MAGIC */
	__u32 layout_version;      /* XLB_LAYOUT_VERSION of the pinned maps */
	__u32 max_connections;     /* flow_table.max_connections the flow map was sized for */
	__u32 owner_pid;           /* the process that pinned last */
	__u64 netns_cookie;        /* network namespace the interfaces and links belong to (SO_NETNS_COOKIE) */
	__u64 hot_upgrades_ok;     /* hand-offs that completed, since the first pin */
	__u64 hot_upgrades_failed; /* hand-offs that failed */
	__u8 config_digest[32];    /* SHA-256 of the effective config of owner_pid */
};

_Static_assert(sizeof(struct xlb_pin_meta) == 72, "struct xlb_pin_meta has no implicit padding");

/*
 * Every size of the data path: array bounds, map sizes, queue and batch
 * lengths. Go reads them as the generated constants xlbXlbLimits* (the
 * exported ones are re-named in pkg/dataplane/limits.go).
 */
enum xlb_limits {
	XLB_DIRS = 2,                /* flow directions (enum xlb_dir) */
	XLB_ENTRIES_PER_PAIR = XLB_DIRS, /* flow entries per connection pair: one per direction */
	XLB_XDP_ACTIONS = XDP_REDIRECT + 1, /* XDP verdicts (the kernel's enum xdp_action), counted at enum xlb_counter 0.. */
	XLB_MAX_PORTS = 8,           /* port mappings per service (DESIGN §1, §9) */
	XLB_MAX_SERVICES = 256,      /* services, serving and draining (DESIGN §9): service ids 0..255 in flow_value.service_id */
	XLB_MAX_LISTENS = XLB_MAX_SERVICES * XLB_MAX_PORTS, /* (address, proto, port) keys of xlb_listen */
	XLB_SERVICE_NAME_LEN = 32,   /* a service's name, at most (DESIGN §9 name syntax) */
	XLB_SERVICE_SETS = XLB_MAX_SERVICES * 2, /* xlb_backend_sets slots: each service's routable set, double buffered (slot = service * 2 + struct service active_set) */
	XLB_LISTEN_FILTER_SHIFT = 12, /* the listen prefilter (struct xlb_config listen_filter) has 1 << this many bits */
	XLB_LISTEN_FILTER_BITS = 1 << XLB_LISTEN_FILTER_SHIFT, /* bits of the listen prefilter: few false positives with XLB_MAX_SERVICES addresses */
	XLB_LISTEN_FILTER_WORDS = XLB_LISTEN_FILTER_BITS / 64, /* its 64-bit words in struct xlb_config */
	XLB_LISTEN_HASH_MUL = 0x61C88647, /* the prefilter's multiplicative hash (the kernel's GOLDEN_RATIO_32, include/linux/hash.h) */
	XLB_MAX_BACKENDS = 1024,     /* backend ids 0..1023, one per backend address: SNAT port spaces; routable set size limit */
	XLB_MAX_MEMBERS = 1024,      /* member ids 0..1023, one per (service, backend address): the per-backend counter cells, i.e. backends of all services together */
	XLB_MAX_INTERFACES = 64,     /* egress interfaces the redirect map (xlb_tx_ports) holds */
	XLB_DEFAULT_MAX_CONNECTIONS = 262144, /* flow_table.max_connections default; XLB_ENTRIES_PER_PAIR flow entries each */
	XLB_MAX_SNAT_IPS = 8,        /* SNAT addresses (snat.ip list) */
	XLB_MAX_SNAT_RETIRED = 16,   /* retired SNAT spaces (struct xlb_config retired) */
	XLB_SNAT_PORT_SPACE = 65536, /* ports a bitmap of one (backend, SNAT address) may cover */
	XLB_SNAT_MAX_WORDS = XLB_MAX_SNAT_IPS * (XLB_SNAT_PORT_SPACE / 64), /* bitmap words per backend id, at most */
	XLB_PICK_TRIES = 4,          /* routable backends tried per SYN when SNAT ports run out */
	XLB_MAX_NEXTHOPS = 65536,    /* next-hop slots (xlb_nexthops); a power of two */
	XLB_NEXTHOP_PROBES = 8,      /* slots probed from a next hop's hash */
	XLB_FIB_MEMOS = 512,         /* per CPU: remembered FIB answers toward backends (by id) and as many toward clients (by address); a power of two */
	XLB_FIB_MEMO_TICKS = 64,     /* a remembered FIB answer serves new pairs for this long (nexthop.h memo_next_hop): 64-640 ms */
	XLB_WSCALE_NONE = 0xff,      /* flow_value.wscale: the sender's SYN carried no window scale */
	XLB_WSCALE_UNKNOWN = 0xfe,   /* flow_value.wscale: not seen (a pair migrated from layout 2): any window */
	XLB_WSCALE_MAX = 14,         /* RFC 7323 §2.3: larger shifts are used as 14 */
	XLB_LONE_CHECK_TICKS = 256,  /* idle ticks before a packet checks its entry's counterpart */
	XLB_CLOSE_QUEUE_SLOTS = 8192, /* per-CPU close queue slots (the ring buffer fallback) */
	XLB_CLOSE_RING_BYTES = 1 << 22, /* pair event ring buffer bytes (a power of two of pages): 131,072 events */
	XLB_REAP_BATCH = 2048,       /* reap requests per run of the reaper */
	XLB_SNAT_SYNC_BATCH = 1024,  /* requests per run of the SNAT bitmap sync (struct snat_sync_batch) */
	XLB_NEXTHOP_BATCH = 1024,    /* next-hop requests per run of xlb_nexthop_ctl */
	XLB_PAIR_EVENTS = 8,         /* counters per member id in xlb_pair_events (enum xlb_pair_event; room for 8) */
	XLB_REAPED_REASONS = 16,     /* counters per member id in xlb_reaped (enum xlb_reaped_reason; room for 16; 8 until layout 10) */
	/* cells of the per-backend counter maps (counters.h backend_cell), by member id (layout 9) */
	XLB_BACKEND_STATS_SLOTS = XLB_MAX_MEMBERS * XLB_DIRS, /* one per member id and enum xlb_dir */
	XLB_PAIR_EVENT_CELLS = XLB_MAX_MEMBERS * XLB_PAIR_EVENTS,
	XLB_REAPED_CELLS = XLB_MAX_MEMBERS * XLB_REAPED_REASONS,
	XLB_HS_BOUNDS = 16,          /* upper bounds of the handshake histogram's buckets (XLB_HS_BOUNDS_US) */
	XLB_HS_CELLS = XLB_HS_BOUNDS + 2, /* counters per member id in xlb_handshake (enum xlb_hs_cell) */
	XLB_HANDSHAKE_CELLS = XLB_MAX_MEMBERS * XLB_HS_CELLS,
	XLB_FRAG_DATAGRAMS = 8192,   /* fragmented datagrams remembered at once (xlb_frags, an LRU hash) */
	XLB_FRAG_TTL_MS = 1000,      /* a remembered datagram's later fragments follow its first for this long */
	/* schedules of the table schedulers (layout 10; struct sched_head, struct sched_chunk) */
	XLB_SCHED_CHUNK = 32,        /* schedule entries per struct sched_chunk (u16 each: 64 bytes) */
	XLB_SCHED_SEED = 0x584c4231, /* the fixed jhash seed of the Maglev hashes (jhash.h sched_hash; pkg/sched HashFiveTuple, HashClientIP): the same pick on every host and version */
	/* UDP (layout 11; DESIGN §9) */
	XLB_SNAT_PROTOS = 2,         /* SNAT port spaces per (backend id, SNAT address): TCP (half 0) and UDP (half 1); the UDP half exists only while a UDP service does */
	XLB_SNAT_CURSORS = XLB_SNAT_PROTOS * XLB_MAX_BACKENDS, /* xlb_snat_cursors: half * XLB_MAX_BACKENDS + backend id */
	XLB_SVC_COUNTERS = 4,        /* per-CPU counters per service id in xlb_svc_counters (enum xlb_svc_counter; room for 4) */
	XLB_SVC_COUNTER_CELLS = XLB_MAX_SERVICES * XLB_SVC_COUNTERS,
	XLB_DEFAULT_UDP_TIMEOUT_SECS = 30,         /* flow_table.udp_timeout_secs default: a UDP pair that saw no reply (conntrack's nf_conntrack_udp_timeout) */
	XLB_DEFAULT_UDP_STREAM_TIMEOUT_SECS = 120, /* flow_table.udp_stream_timeout_secs default: a UDP pair once a reply was seen (nf_conntrack_udp_timeout_stream) */
};

/* Flow direction, part of the flow key. */
enum xlb_dir {
	XLB_DIR_CLIENT = 0,  /* client -> listen:local_port (forward entry) */
	XLB_DIR_BACKEND = 1, /* backend:remote_port -> snat_ip:snat_port (reverse entry) */
};

_Static_assert(XLB_DIR_BACKEND < XLB_DIRS, "XLB_DIRS counts every enum xlb_dir");

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
 * Flow flags (flow_value.flags), only ever added to: set with a
 * compare-and-swap of the entry's generation and flags together (flow.h
 * flow_set), never cleared while the entry lives.
 *
 * Pair state, on the forward (XLB_DIR_CLIENT) entry only: the handshake
 * (XLB_F_SYNACK, XLB_F_ESTABLISHED; DESIGN §6b: a pair without
 * XLB_F_ESTABLISHED is embryonic) and the close state. Concurrent FINs
 * and RSTs on two CPUs decide exactly once which packet made the pair
 * terminal: that packet also sets XLB_F_CLOSED_FIN or XLB_F_CLOSED_RST,
 * counts the closure and posts the close event. The CLOSED bit, not the
 * FIN/RST bits, is what makes a pair terminal for the SYN path, the
 * maintenance loop and the gauges: it is set once, and its kind never
 * changes (a RST after both FINs leaves the pair in time-wait).
 *
 * Entry state, on either entry: XLB_F_ACK_SEEN (the entry's sender has
 * sent an ACK, so track_seq and track_win hold its receive window), and
 * on the reverse entry the SNAT port's state (XLB_F_PORT_FREED,
 * XLB_F_HOLD; DESIGN §6b "SNAT reuse").
 *
 * Timestamps (tsopt.h; issue 36): XLB_F_TS_SYN on the forward entry from
 * its creation when the client's SYN carried the timestamp option;
 * XLB_F_TS on both entries once the backend's first SYN-ACK carried it
 * too (negotiated, RFC 7323 §3.2): from then on every segment's TSval
 * toward the backend is raised by ts_off and every TSecr toward the
 * client lowered by it.
 */
enum xlb_flow_flags {
	XLB_F_FIN_CLIENT = 1 << 0,   /* client sent FIN */
	XLB_F_FIN_BACKEND = 1 << 1,  /* backend sent FIN */
	XLB_F_RST_CLIENT = 1 << 2,   /* client sent an accepted RST */
	XLB_F_RST_BACKEND = 1 << 3,  /* backend sent an accepted RST */
	XLB_F_INIT_BACKEND = 1 << 4, /* the first FIN/RST came from the backend */
	XLB_F_CLOSED_FIN = 1 << 5,   /* terminal: both FINs (time-wait) */
	XLB_F_CLOSED_RST = 1 << 6,   /* terminal: reset */
	XLB_F_SYNACK = 1 << 7,       /* the backend's SYN-ACK went through */
	XLB_F_ESTABLISHED = 1 << 8,  /* the client ACKed the backend's SYN-ACK: not embryonic */
	XLB_F_ACK_SEEN = 1 << 9,     /* (either entry) its sender has sent an ACK */
	XLB_F_PORT_FREED = 1 << 10,  /* (reverse entry) terminal with no backend TIME_WAIT: the SNAT port's bit is clear, a new pair may take it over */
	XLB_F_HOLD = 1 << 11,        /* (reverse entry) lone on purpose: its pair was replaced or reaped while the backend may hold TIME_WAIT; keeps the SNAT port until snat_hold after the close */
	XLB_F_TS_SYN = 1 << 12,      /* (forward entry) the client's SYN carried timestamps: ts_off is the pair's offset */
	XLB_F_TS = 1 << 13,          /* (both entries) timestamps negotiated on this pair: TSval and TSecr rewritten by ts_off */
	XLB_F_UDP = 1 << 14,         /* (both entries, set at creation; layout 11) a UDP pair: the peer's key has IPPROTO_UDP; any datagram refreshes it; no TCP state */
	XLB_F_UDP_REPLIED = 1 << 15, /* (both entries, forward first; layout 11) the backend answered: the stream timeout applies; whoever adds it to the forward entry takes the pair out of its service's unreplied count (xlb_udp_unreplied) */
};

/* The number of flow flags: bounds flow_set's retries (flow.h). */
#define XLB_FLOW_FLAG_BITS 16

#define XLB_F_CLOSED (XLB_F_CLOSED_FIN | XLB_F_CLOSED_RST)

/*
 * One directional entry: the rewrite recipe for packets matching its key, plus
 * the pair link and state. 56 bytes.
 *
 * The counterpart's key is not stored: it is the recipe read backwards,
 * {daddr, saddr, dport, sport, the other direction} (flow_peer_key).
 *
 * The egress interface and MACs are not stored either: nexthop names a
 * slot of xlb_nexthops, which the daemon keeps current from netlink
 * neighbour and link events, so an established flow follows a changed
 * MAC (struct nexthop).
 *
 * last_seen is the low 32 bits of the data path's clock (jiffies) when a
 * packet last went through this entry. While the pair is embryonic (no
 * XLB_F_ESTABLISHED) packets leave it alone, so the forward entry's
 * last_seen is the SYN's time and the embryonic TTL runs from there. On a
 * terminal forward entry it stays at the moment the pair became terminal
 * (the time-wait and reset clocks start there); on a XLB_F_HOLD entry it
 * is that moment too. Ages are computed modulo 2^32, so they are exact up
 * to 2^31 ticks (24.8 days at HZ=1000); orphan_ttl_secs is capped well
 * below.
 *
 * TCP tracking (RST validation, RFC 5961 §3; the window check of
 * nf_conntrack's TCP tracking): track_seq and track_win describe what the
 * entry's sender will accept. With XLB_F_ACK_SEEN, track_seq is the last
 * acknowledgement number it sent (its RCV.NXT as the data path knows it)
 * and track_win its last advertised window, shifted by its window scale.
 * A RST toward it ends the pair only when exact (seq == track_seq, or the
 * counterpart's segment end: syn_us below; track.h rst_verdict); one with
 * seq - track_seq <= track_win is forwarded without ending it, any other
 * dropped. Before its first ACK, a client's forward entry holds its SYN's
 * sequence + 1 in track_seq: the one acknowledgement a RST answering that
 * SYN carries.
 *
 * Handshake latency (xlb_handshake): syn_us is the time the data path
 * forwarded the pair's first SYN, on the forward entry only: the low 32
 * bits of CLOCK_MONOTONIC in microseconds (clock.h now_us32, never 0). A
 * retransmitted SYN leaves it alone; the backend's first SYN-ACK adds its
 * age to the backend's histogram. Ages are exact up to 2^32 µs (71
 * minutes), far beyond a client's SYN retries (tcp_syn_retries 6: 127 s).
 * 0 on reverse entries and on pairs created by a layout that did not time
 * SYNs (migrated from layout 3): those are never counted. The field sits
 * where the kernel rounded the 44-byte value of layout 3 up to 48 bytes
 * anyway: the flow map takes no more memory for it.
 *
 * The sender's segment end (track.h track_send), in syn_us once the
 * SYN's time is no longer needed: the end of the newest segment the
 * entry's sender sent (sequence + length, SYN and FIN counting one: its
 * SND.NXT as the data path saw it), moved forward only; on the reverse
 * entry from the backend's SYN-ACK on (reverse entries never time a SYN),
 * on the forward entry from the client's ACK that establishes the pair
 * (track_handshake clears the SYN's time there). 0: not known yet, taken
 * from the sender's next segment. The forward entry of a pair an earlier
 * layout established still holds its SYN's time there until the client's
 * segments pass it: one more value a RST must hit exactly, and a port
 * such a pair closes with held through the time-wait. It tells a
 * simultaneous close from a client-first one (note_close: the backend's
 * FIN acknowledges the client's FIN, or the backend holds TIME_WAIT) and
 * which RSTs are exact (a RST right behind its sender's last segment,
 * before the receiver's ACK of it passed: rst_verdict).
 *
 * Writes through an entry's pointer (flow.h, "stale pointers"): the flow
 * map preallocates its elements and the kernel hands a deleted one to the
 * next insert at once, so a CPU still holding the pointer of a pair that
 * another CPU replaced or reaped holds a new pair's memory. The data path
 * reads the generation right after its lookup and writes only while the
 * entry still has it: flags with a compare-and-swap of generation and
 * flags together (one aligned 64-bit word, which is why they come before
 * nexthop), other fields just after checking the generation again, and a
 * packet whose entry changed generation while it was rewritten is dropped
 * (XLB_C_PAIR_GONE_IN_FLIGHT).
 */
struct flow_value {
	/* recipe: the packet leaves with these addresses and ports */
	__be32 saddr_be;
	__be32 daddr_be;
	__be16 sport_be;
	__be16 dport_be;
	__u16 csum_ip;     /* folded one's complement delta for the IPv4 header */
	__u16 csum_l4;     /* folded delta for the TCP checksum (pseudo header + ports) */
	/* pair: generation and flags are one 8-byte aligned word (flow.h flow_set) */
	__u32 generation;  /* same on both entries of a pair; never 0 */
	__u32 flags;       /* enum xlb_flow_flags */
	__u32 nexthop;     /* slot in xlb_nexthops: egress interface and MACs */
	__u32 last_seen;   /* jiffies, low 32 bits */
	/* the sender's receive window, as it last advertised it */
	__u32 track_seq;
	__u32 track_win;
	__u16 backend_id;
	__u8 wscale;       /* the sender's window scale shift (0..14), XLB_WSCALE_NONE or XLB_WSCALE_UNKNOWN */
	__u8 pad;          /* always zero */
	/* the handshake's latency (handshake.h) */
	__u32 syn_us;      /* forward entry: the client's SYN, µs (clock.h now_us32); 0: not timed; then the sender's segment end (above) */
	/* timestamps (tsopt.h) */
	__u32 ts_off;      /* the pair's TSval offset toward the backend, the same on both entries; 0 without XLB_F_TS_SYN */
	/* the pair's service (layout 9; issue 29), the same on both entries */
	__u16 member_id;   /* the (service, backend address) member: the backend's counter cells (counters.h) */
	__u16 service_id;  /* the service whose listen address and port the client's SYN reached */
};

_Static_assert(sizeof(struct flow_value) == 56, "struct flow_value has no implicit padding");
_Static_assert(__builtin_offsetof(struct flow_value, flags) == __builtin_offsetof(struct flow_value, generation) + 4 &&
	       __builtin_offsetof(struct flow_value, generation) % 8 == 0,
	       "generation and flags form one aligned 64-bit word (flow_set's compare-and-swap)");
_Static_assert(XLB_F_UDP_REPLIED < (1 << XLB_FLOW_FLAG_BITS), "XLB_FLOW_FLAG_BITS counts every flow flag");

/*
 * A next hop (xlb_nexthops, XLB_MAX_NEXTHOPS slots): where packets of the
 * entries naming it leave, and with which MACs. 24 bytes.
 *
 * A slot is identified by (ifindex, ip_be): the neighbour bpf_fib_lookup
 * returned (the gateway, or the destination itself on link). Where the
 * lookup fails for a client, the SYN's own frame gives the MACs and the
 * slot is identified by (ingress ifindex, ip 0, dmac): the L2 sender.
 * The data path claims a free slot at pair creation (slot probing from
 * nexthop_hash, XLB_NEXTHOP_PROBES slots; a free slot has ifindex 0,
 * claimed with compare-and-swap) and stamps used. The daemon rewrites
 * smac and dmac when the kernel's neighbour or the interface's address
 * changes, and frees slots no entry named for a whole maintenance walk.
 * A packet whose slot was freed meanwhile looks its next hop up again.
 *
 * A stale slot (ifindex with XLB_NEXTHOP_STALE set) is a next hop the
 * network no longer has as it was: a route that named it changed or went,
 * or its neighbour turned FAILED (pkg/hostnet WatchNextHops). The daemon
 * marks it with compare-and-swap through xlb_nexthop_ctl. It matches no
 * claim and no remembered FIB answer, and is not free, so no new pair
 * takes it; a packet of an entry naming it looks its next hop up again
 * (XLB_C_NEXTHOP_REFRESH) and names the slot that lookup gives. The
 * maintenance walk frees it once no entry names it. L2-sender slots are
 * never marked: the FIB has no answer for them. When the FIB gives a
 * stale slot's next hop again and none of its probed slots is free, a
 * pair creation takes the stale slot back (nexthop.h nexthop_revive), so
 * stale slots idle pairs still name never leave a next hop without slots.
 *
 * Stamping used races the daemon freeing the slot (xlb_nexthop_ctl
 * XLB_NH_FREE marks the slot stale, then reads used): a CPU that names a
 * slot stamps used with an atomic exchange and then reads ifindex again;
 * when the slot went stale meanwhile, it does not take it. Either the
 * daemon sees the stamp and keeps the slot, or the CPU sees the mark.
 */
struct nexthop {
	__u32 ifindex;     /* egress interface; 0: free */
	__be32 ip_be;      /* the neighbour's address; 0: the L2 sender of a SYN */
	__u8 smac[6];
	__u8 dmac[6];
	__u32 used;        /* jiffies (low 32 bits) of the last pair creation that named it */
};

_Static_assert(sizeof(struct nexthop) == 24, "struct nexthop has no implicit padding");

/* nexthop.ifindex of a stale slot: the interface's index with this bit set (indexes are positive ints). */
#define XLB_NEXTHOP_STALE 0x80000000u
/* nexthop.ifindex of a slot xlb_nexthop_ctl is freeing: neither live, stale nor free (nexthop.h nexthop_free). */
#define XLB_NEXTHOP_FREEING 0xffffffffu

/*
 * The Ethernet address of an attached interface (xlb_if_macs, keyed by
 * ifindex): the data path balances only frames addressed to it (ours.h).
 * Written by userspace only, at each attach and whenever the interface's
 * address changes; never pinned. 8 bytes.
 */
struct if_mac {
	__u8 addr[6];
	__u8 pad[2];       /* always zero */
};

_Static_assert(sizeof(struct if_mac) == 8, "struct if_mac has no implicit padding");

/*
 * A slot of xlb_if_mac_slots (ours.h): the address of interface ifindex,
 * in slot ifindex % XLB_MAX_INTERFACES when no other interface holds it;
 * ifindex 0: the slot is unused. The same address is in xlb_if_macs,
 * which the data path reads when the slot is not the interface's. Written
 * by userspace only, never pinned. 12 bytes.
 */
struct if_mac_slot {
	__u32 ifindex;
	__u8 addr[6];
	__u8 pad[2];       /* always zero */
};

_Static_assert(sizeof(struct if_mac_slot) == 12, "struct if_mac_slot has no implicit padding");

/*
 * A listen port mapping (DESIGN §1 ports). remote_port_be 0: each
 * backend's own port (struct backend_ref port_be; remote_port left out
 * with a discovery provider, pkg/config PortMapping.RemotePort). A
 * mapping never has local port 0.
 */
struct port_map {
	__be16 local_port_be;
	__be16 remote_port_be;
};

enum xlb_cfg_flags {
	XLB_CFG_SHUTDOWN = 1 << 0, /* answer matching packets with RST (seed: shutdown) */
};

/*
 * A retired SNAT space (struct xlb_config retired; issue 27 finding 3): a
 * SNAT address and a port range that an earlier config handed out and
 * that reverse entries of live pairs may still hold, after a reload
 * changed snat.ip or snat.port_range. The data path recognises a packet
 * to it as a backend's (its flow entry is looked up and the packet
 * forwarded as usual; one with no entry passes as before), but never
 * hands its ports out: they are in no SNAT bitmap, and releasing one is a
 * no-op (snat.h snat_word). Spaces do not overlap; several may name one
 * address (one per range an earlier config used). The daemon writes
 * the set with each config (pkg/dataplane Configure: the previous
 * config's space and retired set, less the new space) and shrinks it
 * after each maintenance walk pass to the ports reverse entries still
 * hold, dropping a space none holds. 8 bytes.
 */
struct snat_retired {
	__be32 ip_be;
	__u16 port_lo;        /* host order, inclusive */
	__u16 port_hi;        /* host order, inclusive */
};

_Static_assert(sizeof(struct snat_retired) == 8, "struct snat_retired has no implicit padding");

/*
 * The single entry of the config map. Written by userspace only.
 *
 * SNAT ports (DESIGN §6b): each (backend id, SNAT address) has a bitmap of
 * snat_words 64-bit words in xlb_snat_ports, bit i for port snat_port_lo
 * + i, set while the port is taken toward that backend: by a live pair,
 * by a terminal pair whose backend holds TIME_WAIT, or by a XLB_F_HOLD
 * entry. Backend id b's words start at b * nsnat * snat_words, SNAT
 * address a's at a * snat_words within them.
 *
 * The listen prefilter (layout 9; DESIGN §9): bit listen_bit(address)
 * (listen.h: the address times XLB_LISTEN_HASH_MUL, its top
 * XLB_LISTEN_FILTER_SHIFT bits) is set for the listen address of every
 * service that is not XLB_SVC_FREE, serving or draining, so that a
 * removed service's pairs keep flowing. Bits are only ever added while
 * the pinned config lives (pkg/dataplane Configure ORs the services' bits
 * into the previous filter; freeing a service clears none): a service
 * that keeps its name and id but moves to another address keeps its
 * pairs to the former one, and a former address costs its packets one
 * flow-map miss, nothing else. A packet to an address whose bit
 * is clear is no client's of XLB; one whose bit is set is looked up in
 * the flow map, and a SYN of no pair in xlb_listen (a false positive
 * costs that lookup). 512 bytes: 4096 bits keep false positives below 7 %
 * with 256 addresses.
 */
struct xlb_config {
	__u16 snat_port_lo;   /* host order, inclusive */
	__u16 snat_port_hi;   /* host order, inclusive */
	__u32 flags;          /* enum xlb_cfg_flags */
	__u32 nsnat;          /* SNAT addresses in snat_ips_be, 1..XLB_MAX_SNAT_IPS */
	__u32 snat_words;     /* bitmap words per (backend id, SNAT address): ceil(ports in range / 64) */
	__be32 snat_ips_be[XLB_MAX_SNAT_IPS];
	__u32 snat_reuse_ticks; /* jiffies: a freed port is taken over no sooner than this after its last backend packet (pkg/dataplane SNATReuseGuard) */
	__u32 nretired;       /* retired SNAT spaces in retired, 0..XLB_MAX_SNAT_RETIRED */
	struct snat_retired retired[XLB_MAX_SNAT_RETIRED];
	__u64 listen_filter[XLB_LISTEN_FILTER_WORDS];
};

_Static_assert(sizeof(struct xlb_config) == 184 + XLB_LISTEN_FILTER_WORDS * 8, "struct xlb_config has no implicit padding");

/*
 * A routable backend: its address, id (below XLB_MAX_BACKENDS, as
 * flow_value.backend_id: the SNAT port space), its member id in the
 * service whose set holds it (below XLB_MAX_MEMBERS, as
 * flow_value.member_id: the counter cells) and its own port, which
 * mappings without a remote port use (0: none; userspace never publishes
 * a backend without a port while such a mapping exists). 12 bytes
 * (layout 3 held the id in 32 bits and no port; layout 9 added member).
 */
struct backend_ref {
	__be32 ip_be;
	__u16 id;
	__be16 port_be;
	__u16 member;
	__u16 pad;         /* always zero (room for a weight) */
};

_Static_assert(sizeof(struct backend_ref) == 12, "struct backend_ref has no implicit padding");

/*
 * A service's routable set, double buffered: userspace fills the inactive
 * slot, then flips the service's active_set (struct service). Slot
 * service * 2 + set of xlb_backend_sets.
 */
struct backend_set {
	__u32 count;
	__u32 pad;
	struct backend_ref entries[XLB_MAX_BACKENDS];
};

/*
 * Shared mutable state, updated with atomics by the data path. The
 * round-robin position is per service since layout 9 (xlb_rr).
 */
struct xlb_state {
	__u64 generation;    /* last pair generation handed out */
	__u64 clock_jiffies; /* written by xlb_clock: jiffies ... */
	__u64 clock_ns;      /* ... and CLOCK_MONOTONIC ns at the same instant */
};

/*
 * Services (layout 9; DESIGN §9): what a SYN reaches, its address,
 * protocol and ports. xlb_listen maps each (address, protocol, local
 * port) of a XLB_SVC_SERVING service to its id and the mapping's remote
 * port; only a SYN that has no live pair looks it up. Written by
 * userspace only (pkg/dataplane Configure), from the SERVING services.
 * 8 and 4 bytes.
 */
struct listen_key {
	__be32 addr_be;
	__be16 port_be;    /* the local port */
	__u8 proto;        /* IPPROTO_TCP */
	__u8 pad;          /* always zero */
};

_Static_assert(sizeof(struct listen_key) == 8, "struct listen_key has no implicit padding");

struct listen_value {
	__u16 service;         /* service id, below XLB_MAX_SERVICES */
	__be16 remote_port_be; /* the mapping's remote port; 0: each backend's own (struct port_map) */
};

_Static_assert(sizeof(struct listen_value) == 4, "struct listen_value has no implicit padding");

/* struct service state. */
enum xlb_service_state {
	XLB_SVC_FREE = 0,     /* the id is unused */
	XLB_SVC_SERVING = 1,  /* in xlb_listen: its SYNs create pairs */
	XLB_SVC_DRAINING = 2, /* removed from the config: not in xlb_listen (its SYNs pass to the kernel), its pairs flow on */
};

/* struct service flags. */
enum xlb_service_flags {
	XLB_SVC_MIGRATED = 1 << 0, /* layout 8's one service, as the migration made it (no name: the successor's config names it) */
	XLB_SVC_HASH_CLIENT_IP = 1 << 1, /* XLB_SCHED_MAGLEV: hash the client's address alone (maglev.hash client_ip), not the 5-tuple */
};

/* struct service scheduler. */
enum xlb_scheduler {
	XLB_SCHED_ROUND_ROBIN = 0, /* the seed's rule: the next routable backend (xlb_rr) */
	XLB_SCHED_WEIGHTED_RR = 1, /* smooth weighted round robin: entry xlb_rr % len of the service's schedule (layout 10) */
	XLB_SCHED_MAGLEV = 2,      /* Maglev: entry hash % len of the service's schedule (layout 10) */
};

/*
 * A table scheduler's schedule (layout 10; DESIGN §9): the inner map that
 * xlb_sched holds at the slot of the routable set it indexes (service * 2
 * + set, as xlb_backend_sets). Built by userspace only (pkg/sched; a new
 * inner map per build, never rewritten in place), put beside the set it
 * indexes before the service's active_set flips to both. Key 0 holds a
 * struct sched_head (read through a cast: the same 64 bytes), keys
 * 1..ceil(len / XLB_SCHED_CHUNK) the entries: entry i is idx[i %
 * XLB_SCHED_CHUNK] of key 1 + i / XLB_SCHED_CHUNK, a position in the
 * routable set (< its count). Weighted round robin reads entry xlb_rr %
 * len (the smooth cycle, expanded), Maglev entry hash % len (the lookup
 * table). A schedule describes itself, so its length is never torn from
 * its entries; a SYN that finds none, an empty one or an entry beyond the
 * set's count uses round robin and counts XLB_C_SCHED_FALLBACK.
 */
struct sched_head {
	__u32 len;           /* entries: the cycle's length, or the Maglev table's size */
	__u8 kind;           /* enum xlb_scheduler it was built for */
	__u8 pad[3];         /* always zero */
	__u64 rebuilds;      /* schedules built for this service since it took its id (this one included) */
	__u64 built_unix_ms; /* when userspace built it */
	__u8 pad2[40];       /* always zero */
};

_Static_assert(sizeof(struct sched_head) == 64, "struct sched_head has no implicit padding");

struct sched_chunk {
	__u16 idx[XLB_SCHED_CHUNK];
};

_Static_assert(sizeof(struct sched_chunk) == sizeof(struct sched_head), "key 0 of a schedule holds its struct sched_head");

/*
 * The schedule reader's single slot (xlb_sched_info; sched.h
 * xlb_sched_read, run by userspace with BPF_PROG_TEST_RUN): userspace
 * writes slot, the program answers with the schedule at that slot of
 * xlb_sched, its header and the entries naming each position of the set.
 * Opening an inner map by its id would need CAP_SYS_ADMIN, which XLB does
 * not hold. Never pinned.
 */
struct sched_info {
	__u32 slot;          /* in: the xlb_sched slot (service * 2 + set) */
	__u32 found;         /* out: 1 when the slot holds a schedule */
	struct sched_head head;
	__u32 slots[XLB_MAX_BACKENDS]; /* out: entries naming each position (entries at or beyond XLB_MAX_BACKENDS are not counted) */
};

/*
 * A service (xlb_services, XLB_MAX_SERVICES slots by service id): written
 * by userspace only; the data path reads active_set. A successor or a
 * restart after a crash learns the ids, names and draining services from
 * it without the old config. addr holds an IPv4 address in its first 4
 * bytes (network order), the rest zero. 96 bytes (88 until layout 10).
 */
struct service {
	__u8 state;        /* enum xlb_service_state */
	__u8 active_set;   /* 0 or 1: which of the service's two xlb_backend_sets slots is live */
	__u8 proto;        /* IPPROTO_TCP */
	__u8 family;       /* AF_INET */
	__u8 scheduler;    /* enum xlb_scheduler */
	__u8 nports;       /* mappings in ports, 1..XLB_MAX_PORTS */
	__u16 flags;       /* enum xlb_service_flags */
	__u8 addr[16];
	struct port_map ports[XLB_MAX_PORTS];
	char name[XLB_SERVICE_NAME_LEN]; /* NUL-padded; empty on a XLB_SVC_MIGRATED record not yet named */
	__u32 udp_unreplied_max; /* proto IPPROTO_UDP: at most this many of its pairs without a reply (xlb_udp_unreplied); 0 for TCP (layout 11) */
	__u32 pad2;        /* always zero */
};

_Static_assert(sizeof(struct service) == 96, "struct service has no implicit padding");

/*
 * Per-backend per-CPU counters, one slot per direction, indexed by
 * member id * XLB_DIRS + enum xlb_dir (XLB_BACKEND_STATS_SLOTS): a
 * backend serving two services counts in two members' cells. The data path
 * adds to its direction's slot without branching on the direction: the
 * verifier refuses a pointer offset that depends on the path taken unless
 * the loader holds CAP_PERFMON, and XLB loads with CAP_BPF alone.
 */
struct backend_stats {
	__u64 packets; /* as forwarded in this slot's direction */
	__u64 bytes;
	__u64 opened;  /* pairs created (XLB_DIR_CLIENT slot only) */
};

/*
 * Per-backend pair events the data path counts, one per-CPU counter per
 * (member id, event) at member id * XLB_PAIR_EVENTS + event. A closure
 * is counted once, by its kind and initiator (the instance's
 * XLB_C_CLOSED_* split, per member since layout 9 so that a service's
 * closures by initiator are the sum of its members': DESIGN §9). Layout
 * 8's cells had 4 events, the closures not split: its closures became
 * the client-initiated cells (pins/layout8.go).
 */
enum xlb_pair_event {
	XLB_PAIR_CLOSED_FIN = 0,   /* became terminal with both FINs, the client's first */
	XLB_PAIR_CLOSED_RST = 1,   /* became terminal with the client's RST */
	XLB_PAIR_REPLACED_FIN = 2, /* a time-wait pair removed by a new SYN on its tuple, or by a takeover of its SNAT port */
	XLB_PAIR_REPLACED_RST = 3, /* a reset pair removed the same ways */
	XLB_PAIR_CLOSED_FIN_BACKEND = 4, /* became terminal with both FINs, the backend's first */
	XLB_PAIR_CLOSED_RST_BACKEND = 5, /* became terminal with the backend's RST */
};

_Static_assert(XLB_PAIR_CLOSED_RST_BACKEND < XLB_PAIR_EVENTS, "XLB_PAIR_EVENTS counts every enum xlb_pair_event");

/*
 * Pairs the reaper removed, per member id and reason: the xlb_reaped array
 * holds one counter per (member id, reason) at member id *
 * XLB_REAPED_REASONS + reason, written only by the reaper, whose runs the
 * maintenance loop serialises. (One counter per key, not a struct, for the
 * same reason as backend_stats: no field offset chosen by a branch.) With
 * backend_stats' opened count these give the gauges without a recount:
 *   active    = opened - closed_fin - closed_rst - orphaned - lone_active - lone_reverse - embryonic
 *   time-wait = closed_fin - timewait - replaced_fin - lone_timewait
 *   resetting = closed_rst - reset - replaced_rst - lone_reset
 * A pair is accounted for by whoever deletes its forward entry.
 */
enum xlb_reaped_reason {
	XLB_REAPED_TIMEWAIT = 0,      /* time-wait pairs removed after the time-wait */
	XLB_REAPED_RESET = 1,         /* reset pairs removed */
	XLB_REAPED_ORPHANED = 2,      /* idle pairs removed after the orphan TTL */
	XLB_REAPED_LONE_ACTIVE = 3,   /* lone forward entries removed, by the pair's state */
	XLB_REAPED_LONE_TIMEWAIT = 4,
	XLB_REAPED_LONE_RESET = 5,
	XLB_REAPED_LONE_REVERSE = 6,  /* lone reverse entries removed (forward entry lost outside XLB) */
	XLB_REAPED_EMBRYONIC = 7,     /* pairs removed embryonic_ttl after their SYN, never established */
	XLB_REAPED_UDP_UNREPLIED = 8, /* UDP pairs removed udp_timeout after their last datagram, no reply seen (layout 11) */
	XLB_REAPED_UDP_REPLIED = 9,   /* UDP pairs removed udp_stream_timeout after the later entry's last datagram */
	XLB_REAPED_LONE_UDP = 10,     /* lone UDP entries removed, either direction */
};

/*
 * Per-CPU counters per service id (xlb_svc_counters, cell service id *
 * XLB_SVC_COUNTERS + counter; layout 11).
 */
enum xlb_svc_counter {
	XLB_SVC_UDP_OVER_CAP = 0, /* first datagrams passed to the kernel: the service's udp_unreplied_max was reached */
};

_Static_assert(XLB_SVC_UDP_OVER_CAP < XLB_SVC_COUNTERS, "XLB_SVC_COUNTERS counts every enum xlb_svc_counter");

_Static_assert(XLB_REAPED_LONE_UDP < XLB_REAPED_REASONS, "XLB_REAPED_REASONS counts every enum xlb_reaped_reason");

/*
 * What the data path last saw of a backend's timestamps (xlb_backend_ts,
 * one __u32 per backend id, written by the backend's first SYN-ACK of
 * each pair whose client's SYN carried them; tsopt.h): a backend that
 * answers without them (net.ipv4.tcp_timestamps=0) does not negotiate
 * them, so its TIME_WAIT takes no new SYN by timestamp, and the SNAT
 * ports its pairs leave held are not reused (snat.h). Pinned; the daemon
 * reads it for status (backends[].timestamps).
 */
enum xlb_backend_ts_state {
	XLB_BTS_UNKNOWN = 0, /* no SYN-ACK to a SYN with timestamps seen yet */
	XLB_BTS_YES = 1,     /* its last such SYN-ACK carried timestamps */
	XLB_BTS_NO = 2,      /* its last such SYN-ACK carried none */
};

/*
 * The handshake histogram (handshake.h; issue 14 "passive handshake
 * latency"): per member id and CPU, how long the backend took to answer
 * the pair's first SYN with its first SYN-ACK, as the data path saw them
 * pass. XLB_HS_BOUNDS_US are the buckets' upper bounds in µs, log-spaced
 * from 50 µs to 3 s: round(50 µs x 60000^(k/15)), k = 0..15, each about
 * 2.08 times the one before. This list is their one definition: the data
 * path's bucket choice and the enum below (which Go reads through bpf2go,
 * pkg/dataplane HandshakeBuckets) both expand it.
 */
#define XLB_HS_BOUNDS_US(B)                                                            \
	B(0, 50) B(1, 104) B(2, 217) B(3, 451) B(4, 940) B(5, 1957) B(6, 4076)         \
	B(7, 8487) B(8, 17673) B(9, 36801) B(10, 76631) B(11, 159569) B(12, 332270)    \
	B(13, 691886) B(14, 1440714) B(15, 3000000)

/* Bucket k's upper bound in µs: XLB_HS_LE_<k>. */
#define XLB_HS_BOUND_ENUM(k, us) XLB_HS_LE_##k = us,
enum xlb_hs_bound {
	XLB_HS_BOUNDS_US(XLB_HS_BOUND_ENUM)
};

#define XLB_HS_BOUND_COUNT(k, us) +1
_Static_assert((0 XLB_HS_BOUNDS_US(XLB_HS_BOUND_COUNT)) == XLB_HS_BOUNDS, "XLB_HS_BOUNDS counts XLB_HS_BOUNDS_US");

/*
 * The cells of one member id in xlb_handshake, at member id *
 * XLB_HS_CELLS + cell: one counter per bucket, not cumulative (cell k
 * counts the handshakes above bound k-1 up to bound k; cell
 * XLB_HS_BOUNDS those above the last bound), then the sum of every
 * handshake's duration in µs. The count is the buckets' sum.
 */
enum xlb_hs_cell {
	XLB_HS_INF = XLB_HS_BOUNDS,   /* above the last bound */
	XLB_HS_SUM_US = XLB_HS_BOUNDS + 1,
};

_Static_assert(XLB_HS_SUM_US < XLB_HS_CELLS, "XLB_HS_CELLS counts every enum xlb_hs_cell");

/*
 * Close events: one per pair that becomes terminal, posted by the packet
 * that made it so, to the ring buffer (xlb_close_ring) or, where the host
 * refuses ring buffers, to a per-CPU queue (xlb_close_queue). They tell the
 * maintenance loop which pairs to remove and when, without a walk. The same
 * stream carries lone sightings (XLB_CLOSE_LONE), new pairs (XLB_CLOSE_OPEN:
 * the embryonic deadline) and SNAT port holds (XLB_CLOSE_HOLD). 32 bytes.
 */
enum xlb_close_kind {
	XLB_CLOSE_FIN = 1,  /* both FINs: remove after the time-wait */
	XLB_CLOSE_RST = 2,  /* reset: remove on the next cycle */
	XLB_CLOSE_LONE = 3, /* not a close: a packet found this entry's counterpart missing */
	XLB_CLOSE_OPEN = 4, /* not a close: a new pair (forward key, time = its SYN); remove it embryonic_ttl later unless established */
	XLB_CLOSE_HOLD = 5, /* not a close: a XLB_F_HOLD reverse entry (its own key, time = the pair's close); remove it snat_hold after time */
};

/*
 * Lone sightings: a packet on an entry idle for at least
 * XLB_LONE_CHECK_TICKS checks that the entry's counterpart is there and
 * posts an XLB_CLOSE_LONE event when it is not (its key is then the
 * entry's own). A busy flow pays one comparison per packet; the check
 * itself runs at most once per idle spell.
 */
struct close_event {
	struct flow_key key;  /* the pair's forward key; the lone entry's own for XLB_CLOSE_LONE */
	__u32 generation;
	__u32 time;           /* jiffies, low 32 bits (the forward entry's last_seen) */
	__u16 kind;           /* enum xlb_close_kind */
	__u16 backend_id;
	__u32 pad;
};

/*
 * The reaper (xlb_reap): the maintenance loop's requests, each re-checked
 * against the live entry in the kernel just before removing anything, so
 * a packet that refreshed a pair after the loop's decision keeps it. Both
 * enums are packed (one byte) so that struct reap_req holds them by type
 * and the generated Go fields are typed.
 */
enum __attribute__((packed)) xlb_reap_op {
	XLB_REAP_RESET = 1,    /* remove the pair if it is terminal by RST */
	XLB_REAP_TIMEWAIT = 2, /* remove the pair if terminal by FINs for >= time_wait */
	XLB_REAP_ORPHAN = 3,   /* remove the pair if live and idle both ways for >= orphan_ttl */
	XLB_REAP_CHECK = 4,    /* report whether the entry's counterpart is intact */
	XLB_REAP_LONE = 5,     /* remove the entry if it is still lone (never a XLB_F_HOLD entry) */
	XLB_REAP_EMBRYONIC = 6, /* remove the pair if live, never established and >= embryonic_ttl since its SYN */
	XLB_REAP_HOLD = 7,     /* remove the XLB_F_HOLD reverse entry if >= snat_hold since its pair's close */
	XLB_REAP_TS_HOLD = 8,  /* (forward key) a pair ended by FINs leaving the backend in TIME_WAIT with XLB_F_TS: hint its port for timestamp reuse (snat.h); nothing removed */
	XLB_REAP_UDP = 9,      /* (forward key; layout 11) remove the UDP pair if idle >= udp_timeout (no reply seen) or udp_stream_timeout (replied); KEPT answers next */
};

enum __attribute__((packed)) xlb_reap_result {
	XLB_REAPED = 1,        /* removed (a pair, or a lone entry for XLB_REAP_LONE) */
	XLB_REAP_KEPT = 2,     /* the re-check failed: a packet moved it on, or not yet due */
	XLB_REAP_GONE = 3,     /* no entry of that generation (removed or replaced) */
	XLB_REAP_INTACT = 4,   /* CHECK: the counterpart is there */
	XLB_REAP_LONE_FOUND = 5, /* CHECK: the counterpart is missing or of another pair */
	XLB_REAP_REPAIRED = 6, /* ORPHAN/RESET/TIMEWAIT found a lone entry and removed it */
	XLB_REAP_HINTED = 7,   /* TS_HOLD: the port's timestamp reuse hint is set */
};

struct reap_req {
	struct flow_key key;
	__u32 generation;
	enum xlb_reap_op op;
	enum xlb_reap_result result; /* written by the reaper */
	__u16 pad;
	__u32 next;        /* written by the reaper for a KEPT XLB_REAP_UDP: jiffies (low 32 bits) at which the pair falls due as it stands */
};

/* The reaper's single request slot: a batch and the clock it is judged by. */
struct reap_batch {
	__u64 now;         /* jiffies (the loop's clock) */
	__u64 time_wait;   /* jiffies */
	__u64 orphan_ttl;  /* jiffies */
	__u64 embryonic_ttl; /* jiffies */
	__u64 snat_hold;   /* jiffies: a XLB_F_HOLD entry's wait after its pair's close (pkg/maintenance SNATHold) */
	__u64 udp_ttl;     /* jiffies: flow_table.udp_timeout_secs (layout 11) */
	__u64 udp_stream_ttl; /* jiffies: flow_table.udp_stream_timeout_secs */
	__u32 count;
	__u32 pad;
	struct reap_req reqs[XLB_REAP_BATCH];
};

/*
 * The SNAT bitmap sync (snatsync.h xlb_snat_sync): how userspace changes
 * xlb_snat_ports while a program runs on it (pkg/dataplane
 * RebuildSNATPorts). A bit is set only for a reverse entry the kernel
 * finds holding its port, and cleared only when none of the candidate
 * entries userspace names holds it, each checked just before the atomic
 * OR or AND.
 */
enum __attribute__((packed)) xlb_snat_sync_op {
	XLB_SNAT_SYNC_SET = 1,   /* set the bit of the reverse entry at key if it holds its port */
	XLB_SNAT_SYNC_CHECK = 2, /* a candidate holder of the bit (backend_id, key's SNAT address and port) */
	XLB_SNAT_SYNC_CLEAR = 3, /* the last candidate: clear the bit unless it or a CHECK before it holds it */
};

enum __attribute__((packed)) xlb_snat_sync_result {
	XLB_SNAT_SYNC_DONE = 1,    /* the bit was set (SET) or cleared (CLEAR) */
	XLB_SNAT_SYNC_HELD = 2,    /* CHECK, CLEAR: an entry holds the port; the bit stays */
	XLB_SNAT_SYNC_FREE = 3,    /* SET: no entry holds the port; nothing set */
	XLB_SNAT_SYNC_OUTSIDE = 4, /* the port has no bit under the config */
};

struct snat_sync_req {
	struct flow_key key;   /* a reverse entry's key: its SNAT address and port name the bit */
	__u16 backend_id;      /* CHECK, CLEAR: the bit's backend id */
	enum xlb_snat_sync_op op;
	enum xlb_snat_sync_result result; /* written by xlb_snat_sync */
};

_Static_assert(sizeof(struct snat_sync_req) == 20, "struct snat_sync_req has no implicit padding");

/* xlb_snat_sync's single request slot. */
struct snat_sync_batch {
	__u32 count;
	__u32 pad;
	struct snat_sync_req reqs[XLB_SNAT_SYNC_BATCH];
};

/*
 * xlb_nexthop_ctl: the daemon's only way to free a next-hop slot or mark
 * it stale (struct nexthop), each request re-checked in the kernel with
 * compare-and-swap on the slot's ifindex, so that a SYN naming the slot
 * meanwhile keeps it (nexthop.h). Never pinned.
 */
enum __attribute__((packed)) xlb_nexthop_op {
	XLB_NH_FREE = 1,       /* free the slot if it still holds (ifindex, ip_be) and used is before used_before */
	XLB_NH_STALE = 2,      /* mark the slot stale if it still holds the live next hop (ifindex, ip_be) */
};

enum __attribute__((packed)) xlb_nexthop_result {
	XLB_NH_DONE = 1,       /* freed, or marked stale */
	XLB_NH_KEPT = 2,       /* FREE: a pair creation stamped the slot since used_before */
	XLB_NH_CHANGED = 3,    /* the slot holds another next hop (or is free, or stale already for STALE) */
};

struct nexthop_req {
	__u32 id;          /* slot */
	__u32 ifindex;     /* as the daemon read it: XLB_NEXTHOP_STALE set for a stale slot */
	__be32 ip_be;
	__u32 used_before; /* FREE: jiffies, low 32 bits */
	enum xlb_nexthop_op op;
	enum xlb_nexthop_result result; /* written by xlb_nexthop_ctl */
	__u16 pad;
};

_Static_assert(sizeof(struct nexthop_req) == 20, "struct nexthop_req has no implicit padding");

/* xlb_nexthop_ctl's single request slot. */
struct nexthop_batch {
	__u32 count;
	__u32 pad;
	struct nexthop_req reqs[XLB_NEXTHOP_BATCH];
};

/*
 * A FIB answer the data path remembers for new pairs (nexthop.h
 * memo_next_hop): bpf_fib_lookup from src_be to dst_be named next-hop
 * slot nexthop, then holding (ifindex, ip_be), at jiffies at. Per CPU,
 * in the scratch: never pinned, never read by userspace. 24 bytes.
 */
struct fib_memo {
	__be32 src_be;
	__be32 dst_be;
	__u32 nexthop;
	__u32 ifindex;
	__be32 ip_be;
	__u32 at;          /* jiffies, low 32 bits */
};

/*
 * The data path's per-CPU scratch space for pair creation (xlb_scratch):
 * two values do not fit the BPF stack comfortably, and the FIB answers
 * it remembers. Userspace never reads it, and it is never pinned: a new
 * program starts with nothing remembered.
 */
struct create_scratch {
	struct flow_value fwd;
	struct flow_value rev;
	struct flow_value tmpl; /* the forward entry's fields every backend tried shares */
	struct flow_key rkey;
	struct flow_key okey;   /* a takeover's old forward key */
	__u32 rr;               /* the round-robin position of this SYN */
	__u32 took_hold;        /* the try's port was held for the backend's TIME_WAIT (snat_take_port, TSREUSE_TAKE) */
	/* the SYN's service, as xlb_listen named it (xlb.c listen_find) */
	__u32 service;          /* service id */
	__u32 set_slot;         /* its live routable set: slot of xlb_backend_sets */
	__be16 remote_port_be;  /* its mapping's remote port; 0: each backend's own */
	__u8 sched;             /* its scheduler (struct service scheduler, enum xlb_scheduler) */
	__u8 sched_flags;       /* its flags' low byte (enum xlb_service_flags: XLB_SVC_HASH_CLIENT_IP) */
	__u32 start;            /* the position in the set of the first backend tried (sched.h sched_start) */
	__u32 hash;             /* Maglev: the SYN's hash (sched.h sched_hash); 0 for the other schedulers */
	__u32 udp_max;          /* its udp_unreplied_max (struct service; 0 for TCP): udp.h udp_admit */
	__u8 proto;             /* its protocol, the listen key's: IPPROTO_TCP or IPPROTO_UDP */
	__u8 pad[7];
	/*
	 * bpf_fib_lookup's parameters, a struct bpf_fib_lookup (nexthop.h
	 * fib_next_hop): 64 bytes the stack of a SYN's deepest call chain has
	 * no room for (the verifier's 512 bytes for every frame from xlb_xdp
	 * down to a next-hop probe). Words, not the struct: its unions have
	 * no Go form (bpf2go).
	 */
	__u64 fib[8];
	/* toward backend id & (XLB_FIB_MEMOS - 1), then toward clients by their address's hash */
	struct fib_memo memo[2 * XLB_FIB_MEMOS];
};

_Static_assert(sizeof(struct bpf_fib_lookup) == sizeof(((struct create_scratch *)0)->fib),
	       "create_scratch.fib holds a struct bpf_fib_lookup");

/*
 * A fragmented datagram (xlb_frags, frag.h): its sender's and receiver's
 * addresses, IPv4 identification and protocol as its fragments carry
 * them, before any rewrite. 12 bytes.
 */
struct frag_key {
	__be32 saddr_be;
	__be32 daddr_be;
	__be16 id_be;
	__u8 proto;
	__u8 pad;          /* always zero */
};

_Static_assert(sizeof(struct frag_key) == 12, "struct frag_key has no implicit padding");

/*
 * What a datagram's first fragment told of it: the TCP ports its later
 * fragments do not carry, and when it passed (CLOCK_MONOTONIC ns). Never
 * pinned: a successor that lost an entry passes the rest of that one
 * datagram to the kernel. 16 bytes.
 */
struct frag_ports {
	__be16 sport_be;
	__be16 dport_be;
	__u32 pad;         /* always zero */
	__u64 at_ns;
};

_Static_assert(sizeof(struct frag_ports) == 16, "struct frag_ports has no implicit padding");

/*
 * Per-CPU global counters (index into the counters map). The first
 * XLB_XDP_ACTIONS count XDP verdicts, each at its action's value.
 */
enum xlb_counter {
	XLB_C_XDP_ABORTED = XDP_ABORTED,
	XLB_C_XDP_DROP = XDP_DROP,
	XLB_C_XDP_PASS = XDP_PASS,
	XLB_C_XDP_TX = XDP_TX,
	XLB_C_XDP_REDIRECT = XDP_REDIRECT,
	XLB_C_PAIRS_CREATED = XLB_XDP_ACTIONS,
	XLB_C_SNAT_EXHAUSTED,
	XLB_C_TABLE_FULL,
	XLB_C_NO_BACKEND,       /* SYN with an empty routable set (RST) */
	XLB_C_FIB_MISS,         /* SYN dropped: backend next hop unresolved, or no free next-hop slot */
	XLB_C_SYN_REUSED,       /* retransmitted SYN on a live pair */
	XLB_C_PAIRS_REPLACED,   /* SYN met a terminal pair and replaced it */
	XLB_C_INVARIANT,        /* FIN/RST on an entry whose counterpart is missing */
	XLB_C_CLOSED_CLIENT_FIN,
	XLB_C_CLOSED_BACKEND_FIN,
	XLB_C_CLOSED_CLIENT_RST,
	XLB_C_CLOSED_BACKEND_RST,
	XLB_C_SHUTDOWN_RESETS,
	XLB_C_TTL_EXCEEDED,     /* balanced packets dropped with TTL <= 1 (never a new pair) */
	XLB_C_CLOSE_EVENTS_LOST, /* close events the ring buffer had no room for */
	XLB_C_RST_OUT_OF_WINDOW, /* RSTs dropped: sequence outside the receiver's window (RFC 5961 §3) */
	XLB_C_SNAT_TAKEOVERS,   /* SNAT ports taken over from a terminal pair without backend TIME_WAIT */
	XLB_C_SNAT_FALLBACKS,   /* SYNs a backend after the round-robin one took: the earlier ones' ports ran out (or their next hop) */
	XLB_C_HOLD_DROPS,       /* packets dropped on a XLB_F_HOLD entry (the backend's TIME_WAIT of a replaced pair) */
	XLB_C_ICMP_TO_CLIENT,   /* ICMP errors about a pair translated toward the client */
	XLB_C_ICMP_TO_BACKEND,  /* ICMP errors about a pair translated toward the backend */
	XLB_C_NEXTHOP_REFRESH,  /* packets whose next-hop slot had been freed or gone stale: looked up again */
	XLB_C_NOT_OURS,         /* frames XLB would balance that were addressed to another MAC (or a group address): passed untouched */
	XLB_C_FRAGS_FORWARDED,  /* IPv4 fragments of a pair forwarded: first fragments, and later ones that followed them (frag.h) */
	XLB_C_FRAGS_PASSED,     /* IPv4 fragments to the listen or a SNAT address of no known datagram or pair, or of a SYN: passed untouched */
	XLB_C_IP_OPTIONS_FORWARDED, /* segments of a pair with IPv4 options forwarded, the options copied unchanged */
	XLB_C_RST_INEXACT,      /* RSTs in the receiver's window but not at its next sequence: forwarded, the pair kept (RFC 5961 §3: the endpoint answers with a challenge ACK) */
	XLB_C_PAIR_GONE_IN_FLIGHT, /* packets whose pair another CPU replaced or reaped while they were rewritten: dropped, the sender retransmits (flow.h: stale pointers) */
	XLB_C_SNAT_TIMEWAIT_REUSES, /* SNAT ports held for a backend's TIME_WAIT that a SYN with timestamps took (tsopt.h: the backend accepts it, RFC 6191) */
	XLB_C_SCHED_FALLBACK,   /* SYNs of a table scheduler's service that found no usable schedule (none yet, empty, or an entry beyond the set): round robin picked (layout 10) */
	XLB_C_UDP_PAIRS_CREATED, /* UDP pairs created (layout 11; XLB_C_PAIRS_CREATED stays TCP's) */
	XLB_C_UDP_OVER_CAP,     /* first datagrams passed: their service's udp_unreplied_max was reached */
	XLB_C_UDP_NO_BACKEND,   /* first datagrams passed: their service had no routable backend */
	XLB_C_UDP_FRAGS_PASSED, /* UDP fragments to a listen or SNAT address passed untouched (not tracked) */
	XLB_C_MAX,
};

#endif
