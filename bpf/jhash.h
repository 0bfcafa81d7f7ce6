/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * jhash.h — the Linux kernel's jhash (include/linux/jhash.h: Bob
 * Jenkins' lookup3, public domain) for one and three 32-bit words, as the
 * Maglev scheduler hashes a new connection (sched.h sched_hash). pkg/sched
 * HashFiveTuple and HashClientIP compute the same values in Go, and the
 * fixtures check the two agree (sched_fixtures_test.go).
 */
#ifndef XLB_JHASH_H
#define XLB_JHASH_H

#include <linux/types.h>
#include <bpf/bpf_helpers.h>

#define XLB_JHASH_INITVAL 0xdeadbeef

static __always_inline __u32 xlb_rol32(__u32 word, unsigned int shift)
{
	return (word << shift) | (word >> ((-shift) & 31));
}

/* __jhash_nwords: initval added to each word, then __jhash_final */
static __always_inline __u32 xlb_jhash_nwords(__u32 a, __u32 b, __u32 c, __u32 initval)
{
	a += initval;
	b += initval;
	c += initval;
	c ^= b; c -= xlb_rol32(b, 14);
	a ^= c; a -= xlb_rol32(c, 11);
	b ^= a; b -= xlb_rol32(a, 25);
	c ^= b; c -= xlb_rol32(b, 16);
	a ^= c; a -= xlb_rol32(c, 4);
	b ^= a; b -= xlb_rol32(a, 14);
	c ^= b; c -= xlb_rol32(b, 24);
	return c;
}

static __always_inline __u32 jhash_3words(__u32 a, __u32 b, __u32 c, __u32 initval)
{
	return xlb_jhash_nwords(a, b, c, initval + XLB_JHASH_INITVAL + (3 << 2));
}

static __always_inline __u32 jhash_1word(__u32 a, __u32 initval)
{
	return xlb_jhash_nwords(a, 0, 0, initval + XLB_JHASH_INITVAL + (1 << 2));
}

#endif /* XLB_JHASH_H */
