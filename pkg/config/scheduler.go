package config

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/xlbproject/xlb/pkg/sched"
)

// Schedulers' settings (DESIGN §9; docs/schedulers.md): backend weights
// and the Maglev table. The algorithms and the table sizes are pkg/sched's.
const (
	// DefaultWeight is a static backend's weight when the file gives
	// none.
	DefaultWeight = 1
	// MinWeight and MaxWeight bound a static backend's weight (the
	// issue's and IPVS's range). Kubernetes' annotation may also give 0.
	MinWeight = sched.MinWeight
	MaxWeight = sched.MaxWeight
	// DefaultKubernetesTableSize is the Maglev table size of a Kubernetes
	// service without maglev.table_size: 655 endpoints at
	// sched.MinSlotsPerMember, sized from the file only, so that endpoints
	// coming and going never resize (and remap) the table.
	DefaultKubernetesTableSize = 65521
)

// TableSize returns the Maglev table size of the service: 0 unless its
// scheduler is maglev; maglev.table_size when the file gives it; else, for
// static backends, sched.MaglevSize of their configured count (at least
// 500 slots each: 16381 for up to 32 backends, 65521 for up to 131, 524287
// for up to 1048), and DefaultKubernetesTableSize for Kubernetes. It never
// depends on how many backends are routable, so health changes never
// resize the table.
func (s *Service) TableSize() uint32 {
	if s.Scheduler != SchedulerMaglev {
		return 0
	}
	if s.Maglev != nil && s.Maglev.TableSize != 0 {
		return s.Maglev.TableSize
	}
	if st := s.Provider.Static; st != nil {
		return sched.MaglevSize(len(st.Backends))
	}
	return DefaultKubernetesTableSize
}

// MaglevHash returns the service's Maglev hash: "" unless its scheduler
// is maglev, else maglev.hash (default MaglevHashFiveTuple).
func (s *Service) MaglevHash() string {
	switch {
	case s.Scheduler != SchedulerMaglev:
		return ""
	case s.Maglev != nil && s.Maglev.Hash != "":
		return s.Maglev.Hash
	}
	return MaglevHashFiveTuple
}

// TableMemory returns the kernel memory of one of the service's Maglev
// tables in bytes: a 64-byte header and ceil(size/32) chunks of 64 bytes
// (bpf/layout.h struct sched_head, struct sched_chunk). A service may hold
// two while a new table replaces the old one. 0 unless its scheduler is
// maglev.
func (s *Service) TableMemory() uint64 {
	m := uint64(s.TableSize())
	if m == 0 {
		return 0
	}
	return 64 * (1 + (m+31)/32)
}

// scheduler: scheduler is one of the three; a `maglev:` key only with
// scheduler maglev, its hash one of two, its table_size a prime within
// pkg/sched's range with at least sched.MinSlotsPerMember slots per
// static backend (the refusals). A weight under round_robin is
// one warning, not an error: round robin ignores weights, as IPVS's rr
// does.
func (v *validator) scheduler(r svcRef) {
	p := r.field("scheduler")
	if v.failed(p) {
		return
	}
	switch r.s.Scheduler {
	case SchedulerRoundRobin:
		v.weightsIgnored(r)
	case SchedulerWeightedRoundRobin, SchedulerMaglev:
	default:
		v.errorf(p, "must be one of %s, %s, %s; got %q", SchedulerRoundRobin, SchedulerWeightedRoundRobin, SchedulerMaglev, r.s.Scheduler)
		return
	}
	mp := r.field("maglev")
	if !v.set[mp] || v.failed(mp) || r.s.Maglev == nil {
		return
	}
	if r.s.Scheduler != SchedulerMaglev {
		v.errorf(mp, "maglev settings apply only to scheduler maglev; the scheduler is %s (set scheduler: maglev, or remove maglev)", r.s.Scheduler)
		return
	}
	m := r.s.Maglev
	if hp := childPath(mp, "hash"); !v.failed(hp) && m.Hash != MaglevHashFiveTuple && m.Hash != MaglevHashClientIP {
		v.errorf(hp, "must be %q or %q, got %q", MaglevHashFiveTuple, MaglevHashClientIP, m.Hash)
	}
	tp := childPath(mp, "table_size")
	if !v.set[tp] || v.failed(tp) {
		return
	}
	if err := sched.ValidMaglevSize(m.TableSize); err != nil {
		// within range (decodeMaglev refuses the rest): not a prime
		lo, hi := nearPrimes(m.TableSize)
		v.errorf(tp, "must be a prime, got %d; the nearest primes are %d and %d (%s)", m.TableSize, lo, hi, sizesHint)
		return
	}
	v.maglevMembers(r, tp)
}

// sizesHint names the sizes pkg/sched chooses from.
var sizesHint = func() string {
	ss := make([]string, len(sched.MaglevSizes))
	for i, m := range sched.MaglevSizes {
		ss[i] = strconv.FormatUint(uint64(m), 10)
	}
	return "the default sizes are " + strings.Join(ss, ", ")
}()

// nearPrimes returns the largest prime below m and the smallest above it.
func nearPrimes(m uint32) (lo, hi uint32) {
	for lo = m - 1; lo > 2 && !big.NewInt(int64(lo)).ProbablyPrime(0); lo-- {
	}
	for hi = m + 1; !big.NewInt(int64(hi)).ProbablyPrime(0); hi++ {
	}
	return lo, hi
}

// maglevMembers: a Maglev service with a configured table_size (at path)
// has at most table_size / sched.MinSlotsPerMember static backends. The
// default size always holds them: sched.MaglevSize gives 500 slots each
// to up to 2097 backends, more than a service may have (MaxBackends).
// Kubernetes services are sized from the file only: their endpoints are
// not known here (status shows a table overfull).
func (v *validator) maglevMembers(r svcRef, path string) {
	st := r.s.Provider.Static
	if r.s.Scheduler != SchedulerMaglev || st == nil || v.failed(r.field("provider.static.backends")) {
		return
	}
	n, m := len(st.Backends), r.s.TableSize()
	if n <= sched.MaglevMembers(m) {
		v.starvedByWeight(r, m)
		return
	}
	v.errorf(path, "a table of %d slots holds at most %d backends (%d slots each), and the service has %d static backends; use table_size %d or more, or omit it (%d for %d backends)",
		m, sched.MaglevMembers(m), sched.MinSlotsPerMember, n, suggestSize(n), sched.MaglevSize(n), n)
}

// starvedByWeight warns once per Maglev service whose lightest static
// backend's weight gives it less than one of the table's m slots (m ×
// weight / the weights' sum, Katran's population): that backend may get
// no new connection at all although it is routable.
func (v *validator) starvedByWeight(r svcRef, m uint32) {
	st := r.s.Provider.Static
	var sum uint64
	light := -1
	for i, b := range st.Backends {
		w := uint64(max(b.Weight, 1))
		sum += w
		if light < 0 || w < uint64(max(st.Backends[light].Weight, 1)) {
			light = i
		}
	}
	if light < 0 {
		return
	}
	w := uint64(max(st.Backends[light].Weight, 1))
	if uint64(m)*w >= sum {
		return
	}
	bp := r.field("provider.static.backends")
	v.warnf(childPath(indexPath(bp, light), "weight"), "weight %d of the weights' sum %d gives backend %s %.2f of the Maglev table's %d slots: it may get no new connections; raise table_size or its weight",
		w, sum, st.Backends[light].Name, float64(uint64(m)*w)/float64(sum), m)
}

// suggestSize is the smallest of sched.MaglevSizes that holds n members at
// sched.MinSlotsPerMember slots each.
func suggestSize(n int) uint32 {
	for _, m := range sched.MaglevSizes {
		if n <= sched.MaglevMembers(m) {
			return m
		}
	}
	return sched.MaxMaglevSize
}

// weightsIgnored warns once per service when a round_robin service's
// static backends give weights: round robin ignores them (not an error:
// the issue refuses only weights out of range).
func (v *validator) weightsIgnored(r svcRef) {
	st := r.s.Provider.Static
	if st == nil {
		return
	}
	bp := r.field("provider.static.backends")
	first, n := -1, 0
	for i := range st.Backends {
		if v.set[childPath(indexPath(bp, i), "weight")] {
			if first < 0 {
				first = i
			}
			n++
		}
	}
	if first < 0 {
		return
	}
	how := "set scheduler: weighted_round_robin or maglev to use them"
	if v.c.Form == FormTopLevel {
		how = "the top-level form's service is round robin; list it under services: with scheduler weighted_round_robin or maglev to use them"
	}
	given := "1 backend gives one"
	if n > 1 {
		given = fmt.Sprintf("%d backends give one", n)
	}
	v.warnf(childPath(indexPath(bp, first), "weight"), "weights are ignored by round_robin (%s); %s", given, how)
}
