package backend

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/hostnet"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// State of a backend in the manager. The status API and the metrics do
// not show it as such: snapshot.Snapshot.BackendState maps it, with the
// backend's pairs, to an api.BackendState (DESIGN §3). The words shared
// with the API are the API's constants.
type State string

const (
	// Routable: discovered, route and neighbour resolved, eligible for new connections.
	Routable = State(api.Routable)
	// Unreachable: discovered, but no usable route or neighbour yet; retried.
	Unreachable = State(api.Unreachable)
	// Unhealthy: discovered and resolved, but its active health checks
	// fail (or have not answered yet): no new connections, its pairs
	// untouched (DESIGN §6b).
	Unhealthy = State(api.Unhealthy)
	// Departed: no longer discovered; pairs may still reference it (the
	// status API shows it as draining while they do).
	Departed State = "departed"
	// Quiesced: discovered and resolved, but its weight is 0 (a
	// Kubernetes weight annotation): never published, so no new
	// connections, its pairs untouched; the status API shows it as
	// draining with reason ReasonWeightZero (issue 30).
	Quiesced State = "quiesced"
)

// ReasonWeightZero is a Quiesced backend's Status.Reason.
const ReasonWeightZero = "weight 0"

// Status is one backend's current state in one service.
type Status struct {
	// ID is the member id (per service and backend address), which keys
	// the data path's per-backend counters; Backend is the address's
	// backend id, which keys its SNAT port space and timestamp state,
	// shared by every service the address serves (DESIGN §9).
	ID         uint32
	Backend    uint32
	Service    string
	Name       string
	IP         netip.Addr
	Port       uint16 // Backend.Port
	Weight     uint16 // Backend.Weight; an inherited backend's Ref's, else 1
	State      State
	Reason     string        // why it is unreachable or unhealthy; empty otherwise
	Route      hostnet.Route // valid when resolved (routable or unhealthy)
	Discovered bool
	// Health is the active health checks' view; nil when health_check
	// is not configured or the backend is not discovered.
	Health *Health

	resolved bool // Route is valid: the last resolution succeeded
	warned   bool // unreachability logged since it was last routable
	// inherited: in the predecessor's routable set (Options.Inherited)
	// and not yet confirmed by this process's provider: routable as it
	// is, not resolved or checked, until the provider's first set.
	inherited bool
	// holdRoutable: it was inherited and the provider's first set kept
	// it: it stays routable until its first health check answers, as
	// the data path had it (no check failed yet).
	holdRoutable bool
	checker      *checker // nil without health checks
}

// Publisher receives each service's routable set; *dataplane.Dataplane
// implements it.
type Publisher interface {
	// SetRoutable replaces service svc's routable set.
	SetRoutable(svc uint16, refs []Ref) error
	// ResetBackend clears a backend id's SNAT ports, port cursor and
	// timestamp state before the id is reused for another address.
	ResetBackend(id uint32) error
	// ResetMember clears a member id's counter cells (statistics, pair
	// events, reaped counts, handshake histogram) before the id is
	// reused for another member.
	ResetMember(id uint32) error
}

// Ref is one routable backend of a service as the data path gets it: its
// backend id (ID), member id, address and port (Backend.Port; 0 when the
// mappings' remote_port applies).
type Ref = dataplane.BackendRef

// Options tune a Manager. Zero values take the defaults noted.
type Options struct {
	// Service and ServiceID name the service whose backends the manager
	// runs (its members are (Service, address)) and its data-path id.
	Service   string
	ServiceID uint16
	// Pool hands out backend and member ids; every service's manager of
	// an instance shares one (nil: a pool of this manager's own).
	Pool *Pool
	// RetryInterval is how often unresolved backends are retried (1 s).
	RetryInterval time.Duration
	// RecheckInterval is how often routable backends are re-resolved (10 s).
	RecheckInterval time.Duration
	// PendingWait bounds how long the initial sync waits for neighbours
	// being resolved (2 s), so the first SYN does not miss.
	PendingWait time.Duration
	// HealthCheck enables active health checks (nil: none). HealthPort
	// is the port checked when HealthCheck.Port is 0 (the first mapping's
	// remote_port); when both are 0, the backend's own port is;
	// HealthSource is the address checks leave from (the first SNAT
	// address, as the data path's packets do).
	HealthCheck  *config.HealthCheck
	HealthPort   uint16
	HealthSource netip.Addr
	// Reserved are this instance's own addresses (every service's listen
	// address and the SNAT addresses): a discovered backend at one of them would loop
	// through the data path, so it is skipped with a warning (static
	// backends are refused by config validation already).
	Reserved []netip.Addr
	// HealthNetns runs f, a health checker's loop, on a thread in the
	// network namespace the checks leave from (nil: f runs as is, in the
	// daemon's namespace; tests run the manager beside a lab namespace).
	HealthNetns func(f func())
	// Clock is the time source of id reuse and health checks (nil: the
	// wall clock); tests pass their own.
	Clock Clock
	// Known are this service's backends a predecessor gave ids to (pairs
	// in the adopted flow map reference them, or they were in its
	// routable set): they keep their ids, so adopted pairs keep their
	// backend's counters, and those the provider no longer discovers are
	// departed (shown draining while pairs reference them).
	Known []Known
	// Inherited is the routable set the data path holds at start, a
	// predecessor's (handed over, or adopted after a crash): those
	// backends stay routable, as if discovered, until the provider's
	// first set replaces them, so an instance whose provider cannot sync
	// (the Kubernetes API down during a reload or a crash-restart) keeps
	// serving them and stays ready, its provider stale (issue 28).
	Inherited []Ref
	// MaglevTableSize is the service's Maglev table size (0: another
	// scheduler). The table is sized from the config, never from the
	// routable count; a routable set of more than MaglevTableSize/
	// sched.MinSlotsPerMember members (Kubernetes: static sets are refused by the
	// config) is still published, with one warning per overfull spell:
	// the table's collateral then exceeds about 1 % (DESIGN §9).
	MaglevTableSize uint32
	Log             logrus.FieldLogger
}

// Known is a backend a predecessor knew: its service, member id (ID),
// backend id, address and name (the address as text when the name is
// unknown, after a crash). A predecessor of layout 8 sends neither
// Service nor Backend: its one service's member ids are its backend ids.
type Known struct {
	ID      uint32
	Backend uint32
	Service string `json:",omitempty"`
	IP      netip.Addr
	Name    string
}

// Manager runs a provider, resolves what it discovers and publishes the
// routable set (ordered by id) whenever it changes.
type Manager struct {
	prov     Provider
	res      *hostnet.Resolver
	pub      Publisher
	opts     Options
	pool     *Pool
	synced   chan struct{}
	syncOnce sync.Once

	// runCtx is Run's context: health checkers run under it.
	runCtx context.Context

	mu        sync.Mutex
	backends  map[netip.Addr]*Status
	published []Ref
	// publishedOnce: a set was published. Until then the data path's set
	// is unknown (empty when fresh, a predecessor's when adopted): the
	// first non-empty set is written at once, an empty one only once the
	// first sync is over (settled), so that an adopted set keeps serving
	// new connections while neighbours resolve.
	publishedOnce, settled bool
	provErr                error
	// pubMu serialises publications: health checkers publish from their
	// own goroutines, and an older set must never land after a newer one.
	pubMu sync.Mutex
	// inheriting: Options.Inherited was not empty and the provider's
	// first set has not been applied yet. Nothing is published
	// meanwhile (Republish included): the inherited set's names are the
	// addresses as text after a crash, and a table scheduler built from
	// them would move connections; the provider's first set has the real
	// names and rebuilds the predecessor's table as it was (issue 30).
	inheriting bool
	// changed gets a token (capacity 1) after each publication.
	changed chan struct{}
	// warnedReserved: the reserved addresses a provider offered (warned once).
	warnedReserved map[netip.Addr]bool
	// overfull: the last published set overfills the Maglev table
	// (Options.MaglevTableSize), warned once per spell.
	overfull bool
}

// NewManager wires a provider, a resolver and a publisher.
func NewManager(p Provider, r *hostnet.Resolver, pub Publisher, o Options) *Manager {
	if o.RetryInterval == 0 {
		o.RetryInterval = time.Second
	}
	if o.RecheckInterval == 0 {
		o.RecheckInterval = 10 * time.Second
	}
	if o.PendingWait == 0 {
		o.PendingWait = 2 * time.Second
	}
	if o.Log == nil {
		o.Log = logrus.StandardLogger()
	}
	if o.Clock == nil {
		o.Clock = wallClock{}
	}
	if o.Pool == nil {
		o.Pool = NewPool(o.Clock)
	}
	m := &Manager{prov: p, res: r, pub: pub, opts: o, pool: o.Pool, runCtx: context.Background(),
		synced: make(chan struct{}), backends: map[netip.Addr]*Status{},
		changed: make(chan struct{}, 1), warnedReserved: map[netip.Addr]bool{}}
	for _, k := range o.Known {
		if err := m.pool.adopt(m.member(k.IP), k.ID, k.Backend); err != nil {
			o.Log.WithFields(logrus.Fields{"backend": k.Name, "ip": k.IP}).WithError(err).Warn("adopted backend id skipped")
			continue
		}
		name := k.Name
		if name == "" {
			name = k.IP.String()
		}
		m.backends[k.IP] = &Status{ID: k.ID, Backend: k.Backend, Service: o.Service, Name: name, IP: k.IP, State: Departed}
	}
	for _, r := range o.Inherited {
		s, ok := m.backends[r.IP]
		if !ok || s.ID != r.Member || s.Backend != r.ID {
			if err := m.pool.adopt(m.member(r.IP), r.Member, r.ID); err != nil {
				o.Log.WithFields(logrus.Fields{"ip": r.IP, "id": r.ID, "member": r.Member}).WithError(err).Warn("inherited routable backend skipped")
				continue
			}
			s = &Status{ID: r.Member, Backend: r.ID, Service: o.Service, Name: r.IP.String(), IP: r.IP}
			m.backends[r.IP] = s
		}
		s.State, s.Discovered, s.Port, s.inherited = Routable, true, r.Port, true
		// It was routable, so its weight was not 0; the data path does
		// not keep weights: 1 until the provider's first set.
		s.Weight = max(r.Weight, 1)
		m.pool.setDiscovered(s.ID, true, time.Time{})
		m.published = append(m.published, r)
	}
	// The data path holds that set already: it is written again only
	// when it changes.
	slices.SortFunc(m.published, compareRefs)
	m.publishedOnce = len(m.published) > 0
	m.inheriting = m.publishedOnce
	return m
}

// member is the pool's key of this service's backend at ip.
func (m *Manager) member(ip netip.Addr) Member { return Member{Service: m.opts.Service, IP: ip} }

// Pool is the pool the manager takes its ids from.
func (m *Manager) Pool() *Pool { return m.pool }

// Service is the name of the manager's service.
func (m *Manager) Service() string { return m.opts.Service }

// ServiceID is the data-path id of the manager's service.
func (m *Manager) ServiceID() uint16 { return m.opts.ServiceID }

// NotePairs is the pool's NotePairs (Pool.NotePairs): with one pool
// shared by several managers, call it on the pool once per sample.
func (m *Manager) NotePairs(at time.Time, busy []uint32) { m.pool.NotePairs(at, busy) }

// Synced is closed once the provider's first set has been resolved (each
// backend routable, unreachable, or still pending after PendingWait) and
// the routable set published.
func (m *Manager) Synced() <-chan struct{} { return m.synced }

// Changed receives a token after each publication of a new routable set
// (a backend became routable, unhealthy, unreachable or departed), so the
// daemon can show it at once rather than with the next maintenance sample.
// Tokens do not queue: one stands for every change since the last read.
func (m *Manager) Changed() <-chan struct{} { return m.changed }

// ProviderName names the provider.
func (m *Manager) ProviderName() string { return m.prov.Name() }

// ProviderError is the provider's last error, nil while it is healthy:
// the error Run ended with, or the one its source reports (Reporter).
func (m *Manager) ProviderError() error {
	m.mu.Lock()
	err := m.provErr
	m.mu.Unlock()
	if err != nil {
		return err
	}
	if r, ok := m.prov.(Reporter); ok {
		return r.LastError()
	}
	return nil
}

// Stale reports whether the routable set is still the inherited one
// (Options.Inherited, not empty) because the provider has not synced:
// it counts as synced for readiness, and status and metrics call the
// provider stale.
func (m *Manager) Stale() bool { return len(m.opts.Inherited) > 0 && !m.EverSynced() }

// EverSynced reports whether the provider's first set was applied
// (Synced is closed).
func (m *Manager) EverSynced() bool {
	select {
	case <-m.synced:
		return true
	default:
		return false
	}
}

// Snapshot returns every backend known to this process, ordered by id. It
// waits for a publication in progress, so a state it shows is the data
// path's.
func (m *Manager) Snapshot() []Status {
	m.pubMu.Lock()
	defer m.pubMu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pruneLocked()
	out := make([]Status, 0, len(m.backends))
	for _, s := range m.backends {
		c := *s
		if s.checker != nil {
			h := s.checker.health()
			c.Health = &h
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Status) int { return int(a.ID) - int(b.ID) })
	return out
}

// pruneLocked forgets the departed backends whose member id another
// service's member took over (Pool: once they were quiet). The caller
// holds m.mu.
func (m *Manager) pruneLocked() {
	for ip, s := range m.backends {
		if !s.Discovered && !m.pool.owns(s.ID, m.member(ip)) {
			delete(m.backends, ip)
		}
	}
}

// Run runs the provider and the resolution loop until ctx ends.
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	m.runCtx = ctx
	m.mu.Unlock()
	defer m.stopCheckers()
	updates := make(chan []Backend, 1)
	provDone := make(chan error, 1)
	go func() { provDone <- m.prov.Run(ctx, updates) }()
	retry := time.NewTicker(m.opts.RetryInterval)
	defer retry.Stop()
	lastFull := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-provDone:
			if ctx.Err() != nil {
				return nil
			}
			m.mu.Lock()
			m.provErr = err
			m.mu.Unlock()
			return err
		case set := <-updates:
			m.apply(set)
			m.resolveAll(ctx, true)
			m.syncOnce.Do(func() {
				m.awaitFirstChecks(ctx)
				m.mu.Lock()
				m.settled = true
				m.mu.Unlock()
				m.publish()
				close(m.synced)
			})
		case <-retry.C:
			full := time.Since(lastFull) >= m.opts.RecheckInterval
			if full {
				lastFull = time.Now()
			}
			m.resolveAll(ctx, full)
		}
	}
}

// apply takes a provider set: new backends get ids (a reused id is reset
// in the data path first), departed ones are marked and their health
// checks stopped.
func (m *Manager) apply(set []Backend) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.opts.Clock.Now()
	set = m.withoutReserved(set)
	current := map[netip.Addr]bool{}
	for _, b := range set {
		current[b.IP] = true
	}
	for ip, s := range m.backends {
		if s.inherited {
			// The provider speaks now: kept ones are resolved and checked
			// from here on, the others depart below.
			s.inherited, s.holdRoutable = false, current[ip]
		}
	}
	m.inheriting = false
	for ip, s := range m.backends {
		if !current[ip] && s.Discovered {
			s.Discovered, s.State, s.Reason = false, Departed, ""
			m.pool.setDiscovered(s.ID, false, now)
			m.stopChecker(s)
			m.opts.Log.WithFields(logrus.Fields{"backend": s.Name, "ip": ip}).Info("backend left discovery; existing connections stay pinned to it")
		}
	}
	for _, b := range set {
		s, ok := m.backends[b.IP]
		if ok && !m.pool.owns(s.ID, m.member(b.IP)) {
			delete(m.backends, b.IP) // its id went to another service's member
			ok = false
		}
		if !ok {
			var err error
			if s, err = m.newMember(b, current); err != nil {
				continue
			}
		}
		s.Name, s.Port, s.Weight, s.Discovered = b.Name, b.Port, b.Weight, true
		m.pool.setDiscovered(s.ID, true, now)
		if s.State == Departed {
			s.State, s.Reason, s.resolved = Unreachable, "not resolved yet", false
		}
		m.startChecker(s)
		m.settle(s) // a weight that turned 0, or back (resolved ones only)
	}
}

// newMember gives a newly discovered backend its ids (a reused id is
// reset in the data path first) and its status. The caller holds m.mu.
func (m *Manager) newMember(b Backend, current map[netip.Addr]bool) (*Status, error) {
	k := m.member(b.IP)
	a, err := m.pool.assign(k, func(o Member) bool { return o.Service == m.opts.Service && current[o.IP] })
	log := m.opts.Log.WithFields(logrus.Fields{"backend": b.Name, "ip": b.IP})
	if err != nil {
		log.WithError(err).Error("backend skipped")
		return nil, err
	}
	if a.MemberReused {
		if err := m.pub.ResetMember(a.Member); err != nil {
			m.pool.undo(k, a)
			log.WithField("member", a.Member).WithError(err).Error("backend skipped: its reused member id could not be reset")
			return nil, err
		}
		if a.OldMember.Service == m.opts.Service {
			delete(m.backends, a.OldMember.IP)
		}
		log.WithFields(logrus.Fields{"member": a.Member, "previous_service": a.OldMember.Service, "previous_ip": a.OldMember.IP}).Info("member id reused: the previous member owns no pairs")
	}
	if a.BackendReused {
		if err := m.pub.ResetBackend(a.Backend); err != nil {
			m.pool.undo(k, a)
			log.WithField("id", a.Backend).WithError(err).Error("backend skipped: its reused id could not be reset")
			return nil, err
		}
		log.WithFields(logrus.Fields{"id": a.Backend, "previous_ip": a.OldAddr}).Info("backend id reused: no member holds the previous address")
	}
	s := &Status{ID: a.Member, Backend: a.Backend, Service: m.opts.Service, IP: b.IP, State: Unreachable, Reason: "not resolved yet"}
	m.backends[b.IP] = s
	return s, nil
}

// withoutReserved drops the backends at one of Options.Reserved, warning
// once per address. The caller holds m.mu.
func (m *Manager) withoutReserved(set []Backend) []Backend {
	out := set[:0:0]
	for _, b := range set {
		if !slices.Contains(m.opts.Reserved, b.IP) {
			out = append(out, b)
			continue
		}
		if !m.warnedReserved[b.IP] {
			m.warnedReserved[b.IP] = true
			m.opts.Log.WithFields(logrus.Fields{"backend": b.Name, "ip": b.IP}).Warn("backend skipped: it is this instance's listen or SNAT address, which would loop through the data path")
		}
	}
	return out
}
