// Package sched builds the schedules of XLB's table schedulers: the smooth
// weighted round robin cycle and the Maglev lookup table (DESIGN §9). It is
// pure Go and the only place the algorithms live: the data path only reads
// the tables built here (entry rr % Len for weighted round robin, entry
// hash % Len for Maglev), and the data path's fixtures, the unit tests and
// the benchmarks all call Build.
package sched

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
)

// Kind is a service's scheduler.
type Kind uint8

const (
	// RoundRobin gives each new connection the next routable backend. It
	// uses no table: Build returns an empty one.
	RoundRobin Kind = iota
	// WeightedRoundRobin is nginx's smooth weighted round robin, expanded
	// by Build for one whole cycle.
	WeightedRoundRobin
	// Maglev is Maglev consistent hashing (Eisenbud et al., "Maglev: A
	// Fast and Reliable Software Network Load Balancer", NSDI 2016) with
	// Katran's weighted population.
	Maglev
)

// String returns the configuration's name of the scheduler.
func (k Kind) String() string {
	switch k {
	case RoundRobin:
		return "round_robin"
	case WeightedRoundRobin:
		return "weighted_round_robin"
	case Maglev:
		return "maglev"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Weight limits: a member's weight is 1..MaxWeight (the and IPVS's
// range). Weight 0 ("no new connections") is the caller's business: such a
// backend is not a member.
const (
	MinWeight = 1
	MaxWeight = 256
)

// MaxMembers is the most members a table can index (Entries are uint16).
const MaxMembers = 1 << 16

// Member is one routable backend. Its index in the slice given to Build is
// the index the table's entries hold (the backend's position in the
// routable set).
type Member struct {
	// Name identifies the backend across hosts and restarts (the
	// configured backend name). Maglev orders members by (Name, IP) and
	// keys each member's permutation on Name, so every host with the same
	// backends builds the same table. An empty Name stands for IP's text.
	Name string
	// IP is the backend's address.
	IP netip.Addr
	// Weight is the backend's relative share of new connections,
	// MinWeight..MaxWeight.
	Weight uint16
}

// key is the text a member is ordered and hashed by.
func (m Member) key() string {
	if m.Name == "" {
		return m.IP.String()
	}
	return m.Name
}

// Table is a built schedule.
type Table struct {
	// Kind is the scheduler the table was built for.
	Kind Kind
	// Len is the number of entries: the WRR cycle's length, or the Maglev
	// table's size M (a prime). It is 0 for RoundRobin and for no members.
	Len uint32
	// Entries holds Len indexes into the members as given to Build. The
	// data path picks Entries[rr % Len] (WRR) or Entries[hash % Len]
	// (Maglev).
	Entries []uint16
	// Slots holds, per member (in the order given to Build), how many
	// entries name it: its share of the table is Slots[i]/Len.
	Slots []uint32
}

// Errors of Build. Each is wrapped with the detail.
var (
	ErrWeight     = errors.New("weight outside 1..256")
	ErrTableSize  = errors.New("maglev table size")
	ErrTooMany    = errors.New("too many members")
	ErrDuplicate  = errors.New("duplicate member")
	ErrKind       = errors.New("unknown scheduler")
	ErrCycleLimit = errors.New("weighted round robin cycle too long")
)

// Build builds the table of scheduler k over the members ms. size is the
// Maglev table's size M and must pass ValidMaglevSize; it is ignored by the
// other schedulers. No members give an empty table (Len 0) and no error.
// Round robin uses no table and always gets an empty one. For the table
// schedulers, every weight must be within MinWeight..MaxWeight, no two
// members may share (Name, IP), and a Maglev table needs at least one slot
// per member (MinSlotsPerMember, 100 per member, is the configuration's
// rule; MaglevSize gives 500 per member).
func Build(k Kind, ms []Member, size uint32) (Table, error) {
	switch k {
	case RoundRobin:
		return Table{Kind: k}, nil
	case WeightedRoundRobin:
	case Maglev:
		if err := ValidMaglevSize(size); err != nil {
			return Table{}, err
		}
	default:
		return Table{}, fmt.Errorf("%w: %d", ErrKind, uint8(k))
	}
	if len(ms) > MaxMembers {
		return Table{}, fmt.Errorf("%w: %d members, at most %d", ErrTooMany, len(ms), MaxMembers)
	}
	for i, m := range ms {
		if m.Weight < MinWeight || m.Weight > MaxWeight {
			return Table{}, fmt.Errorf("%w: member %d (%s) has weight %d", ErrWeight, i, m.key(), m.Weight)
		}
	}
	if len(ms) == 0 {
		return Table{Kind: k, Slots: []uint32{}}, nil
	}
	order, err := ordered(ms)
	if err != nil {
		return Table{}, err
	}
	if k == WeightedRoundRobin {
		return buildWRR(ms, order)
	}
	if uint64(len(ms)) > uint64(size) {
		return Table{}, fmt.Errorf("%w: %d members for a table of %d", ErrTooMany, len(ms), size)
	}
	return buildMaglev(ms, order, size), nil
}

// ordered returns the members' indexes sorted by (Name, IP), the order
// that makes a table independent of the order the members were given in.
func ordered(ms []Member) ([]int, error) {
	order := make([]int, len(ms))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(ms[a].key(), ms[b].key()), ms[a].IP.Compare(ms[b].IP))
	})
	for i := 1; i < len(order); i++ {
		a, b := ms[order[i-1]], ms[order[i]]
		if a.key() == b.key() && a.IP == b.IP {
			return nil, fmt.Errorf("%w: %s (%s) given twice", ErrDuplicate, b.key(), b.IP)
		}
	}
	return order, nil
}
