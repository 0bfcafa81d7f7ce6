package backend

import (
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/xlbproject/xlb/pkg/dataplane"
)

// IDReuseQuiet is how long a departed member's id stays its own after the
// later of its departure and the last maintenance sample that counted a
// pair toward it: longer than the data path's time-wait (60 s, seed
// "Orderly close and reset") and the SNAT hold a replaced pair leaves
// behind (60 s after the backend's FIN, issue 13), so no entry of any kind
// names the id when it is reused, plus slack for the sample period. A
// removed service's id is freed after the same quiet (Pool.Quiet).
const IDReuseQuiet = 2 * time.Minute

// Clock is the manager's time source for id reuse (tests pass their own).
type Clock interface{ Now() time.Time }

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// Member names a member: a backend address in one service (DESIGN §9).
// Its member id keys the data path's per-backend counter cells; the
// address's backend id keys its SNAT port space, cursor and timestamp
// state, shared by every service the address serves.
type Member struct {
	Service string
	IP      netip.Addr
}

// Pool hands out the data path's ids to the backends of every service of
// an instance: a backend id per address (0..dataplane.MaxBackends-1) and
// a member id per (service, address) (0..dataplane.MaxMembers-1). A
// member id is reused only once its member departed and the maintenance
// samples showed no pair toward it for IDReuseQuiet (NotePairs); a
// backend id only once no member holds its address. Every service's
// Manager shares one Pool; it is safe for concurrent use.
type Pool struct {
	clock Clock

	mu      sync.Mutex
	addrs   *registry[netip.Addr]
	members *registry[Member]
	state   map[uint32]*memberState // by member id
	holders map[netip.Addr]int      // registered members per address
	idle    idleness
}

// memberState is what the reuse rule needs of a member.
type memberState struct {
	discovered bool
	departedAt time.Time // zero while discovered, or never departed
}

// NewPool returns an empty pool; clock (nil: the wall clock) times the
// departures.
func NewPool(clock Clock) *Pool {
	if clock == nil {
		clock = wallClock{}
	}
	p := &Pool{clock: clock, state: map[uint32]*memberState{}, holders: map[netip.Addr]int{}, idle: newIdleness()}
	p.addrs = newRegistry[netip.Addr]("backend", dataplane.MaxBackends, p.addrInUse)
	p.members = newRegistry[Member]("member", uint32(dataplane.MaxMembers), p.memberInUse)
	return p
}

// idleness is what the maintenance samples said about each member id's
// pairs.
type idleness struct {
	lastBusy   map[uint32]time.Time // the latest sample that counted a pair toward the id
	lastSample time.Time            // the latest sample at all; zero before the first
}

func newIdleness() idleness { return idleness{lastBusy: map[uint32]time.Time{}} }

// NotePairs records a maintenance sample taken at at: busy are the member
// ids it counted pairs toward (active, time-wait or resetting). The
// daemon calls it once for every sample; ids of departed members become
// reusable IDReuseQuiet after they were last busy.
func (p *Pool) NotePairs(at time.Time, busy []uint32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range busy {
		p.idle.lastBusy[id] = at
	}
	if at.After(p.idle.lastSample) {
		p.idle.lastSample = at
	}
}

// Quiet reports whether no member of service may own a pair: each
// departed, and a sample taken IDReuseQuiet after both its departure and
// its last busy sample has been seen. A removed service's id is freed
// then. A service without members is quiet once a sample was seen.
func (p *Pool) Quiet(service string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.idle.lastSample.IsZero() {
		return false
	}
	for id, k := range p.members.byID {
		if k.Service == service && p.memberInUse(id) {
			return false
		}
	}
	return true
}

// memberInUse is the member registry's test for reuse: an id is in use
// unless its member departed and a sample taken IDReuseQuiet after both
// the departure and the id's last busy sample has been seen. Without
// samples nothing is reusable. The caller holds p.mu.
func (p *Pool) memberInUse(id uint32) bool {
	s, ok := p.state[id]
	if !ok {
		return false // nothing known references it
	}
	if s.discovered || s.departedAt.IsZero() {
		return true
	}
	quietFrom := s.departedAt
	if b, ok := p.idle.lastBusy[id]; ok && b.After(quietFrom) {
		quietFrom = b
	}
	return p.idle.lastSample.Before(quietFrom.Add(IDReuseQuiet))
}

// addrInUse is the backend registry's test for reuse: a backend id is in
// use while a member holds its address. The caller holds p.mu.
func (p *Pool) addrInUse(id uint32) bool {
	ip, ok := p.addrs.byID[id]
	return ok && p.holders[ip] > 0
}

// assignment is the ids a member got, and what they belonged to before
// when reused: the caller resets a reused id's data-path state, or
// undoes the assignment when that fails.
type assignment struct {
	Member, Backend uint32
	// MemberReused: the member id was OldMember's (its counter cells
	// are reset before use).
	MemberReused bool
	OldMember    Member
	// BackendReused: the backend id was OldAddr's (its SNAT ports,
	// cursor and timestamp state are reset before use).
	BackendReused bool
	OldAddr       netip.Addr

	oldState *memberState
	oldBusy  time.Time
	hadBusy  bool
}

// assign returns k's ids, allocating them if needed. current reports the
// members discovered right now, whose ids are never reused.
func (p *Pool) assign(k Member, current func(Member) bool) (assignment, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var a assignment
	if id, ok := p.members.byKey[k]; ok {
		bid, ok := p.addrs.byKey[k.IP]
		if !ok {
			return a, fmt.Errorf("member id %d has no backend id", id)
		}
		return assignment{Member: id, Backend: bid}, nil
	}
	mid, old, reused, err := p.members.id(k, current)
	if err != nil {
		return a, err
	}
	a.Member, a.MemberReused, a.OldMember = mid, reused, old
	if reused {
		p.holders[old.IP]--
		a.oldState = p.state[mid]
		a.oldBusy, a.hadBusy = p.idle.lastBusy[mid]
		delete(p.idle.lastBusy, mid)
	}
	p.holders[k.IP]++
	p.state[mid] = &memberState{}
	bid, oldAddr, breused, err := p.addrs.id(k.IP, nil)
	if err != nil {
		p.undoLocked(k, a)
		return assignment{}, err
	}
	a.Backend, a.BackendReused, a.OldAddr = bid, breused, oldAddr
	return a, nil
}

// undo gives back what assign took for k (a reset failed).
func (p *Pool) undo(k Member, a assignment) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a.BackendReused {
		p.addrs.undoReuse(k.IP, a.OldAddr)
	}
	p.undoLocked(k, a)
}

func (p *Pool) undoLocked(k Member, a assignment) {
	p.holders[k.IP]--
	if !a.MemberReused {
		delete(p.members.byKey, k)
		delete(p.members.byID, a.Member)
		delete(p.state, a.Member)
		return
	}
	p.members.undoReuse(k, a.OldMember)
	p.holders[a.OldMember.IP]++
	p.state[a.Member] = a.oldState
	if a.hadBusy {
		p.idle.lastBusy[a.Member] = a.oldBusy
	}
}

// adopt records the ids a predecessor gave k; it departed at the pool
// clock's now until the provider lists it again.
func (p *Pool) adopt(k Member, member, backend uint32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if have, ok := p.members.byKey[k]; ok && have == member {
		if bid := p.addrs.byKey[k.IP]; bid != backend {
			return fmt.Errorf("%s already has backend id %d", k.IP, bid)
		}
		return nil
	}
	if err := p.addrs.adopt(backend, k.IP); err != nil {
		return err
	}
	if err := p.members.adopt(member, k); err != nil {
		return err
	}
	p.holders[k.IP]++
	p.state[member] = &memberState{departedAt: p.clock.Now()}
	return nil
}

// setDiscovered records that member id entered (yes) or left discovery at
// at.
func (p *Pool) setDiscovered(id uint32, yes bool, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.state[id]
	if !ok {
		return
	}
	s.discovered = yes
	if yes {
		s.departedAt = time.Time{}
	} else {
		s.departedAt = at
	}
}

// owns reports whether member id still belongs to k (a member of another
// service may have taken it over once k was quiet).
func (p *Pool) owns(id uint32, k Member) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	have, ok := p.members.byID[id]
	return ok && have == k
}
