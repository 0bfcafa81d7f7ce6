package backend

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

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
	// Departed: no longer discovered; pairs may still reference it (the
	// status API shows it as draining while they do).
	Departed State = "departed"
)

// Status is one backend's current state.
type Status struct {
	ID         uint32
	Name       string
	IP         netip.Addr
	State      State
	Reason     string        // why it is unreachable; empty otherwise
	Route      hostnet.Route // valid when routable
	Discovered bool

	warned bool // unreachability logged since it was last routable
}

// Publisher receives the routable set; *dataplane.Dataplane implements it.
type Publisher interface {
	SetRoutable([]dataplane.BackendRef) error
}

// Options tune a Manager. Zero values take the defaults noted.
type Options struct {
	// RetryInterval is how often unresolved backends are retried (1 s).
	RetryInterval time.Duration
	// RecheckInterval is how often routable backends are re-resolved (10 s).
	RecheckInterval time.Duration
	// PendingWait bounds how long the initial sync waits for neighbours
	// being resolved (2 s), so the first SYN does not miss.
	PendingWait time.Duration
	// InUse reports whether a backend id still owns flows (for id reuse).
	InUse func(id uint32) bool
	// Known are backends a predecessor gave ids to (pairs in the adopted
	// flow map reference them, or they were in its routable set): they
	// keep their ids, so adopted pairs keep their backend's counters, and
	// those the provider no longer discovers are departed (shown draining
	// while pairs reference them).
	Known []Known
	Log   logrus.FieldLogger
}

// Known is a backend a predecessor knew: its data-path id, address and
// name (the address as text when the name is unknown, after a crash).
type Known struct {
	ID   uint32
	IP   netip.Addr
	Name string
}

// Manager runs a provider, resolves what it discovers and publishes the
// routable set (ordered by id) whenever it changes.
type Manager struct {
	prov     Provider
	res      *hostnet.Resolver
	pub      Publisher
	opts     Options
	reg      *registry
	synced   chan struct{}
	syncOnce sync.Once

	mu        sync.Mutex
	backends  map[netip.Addr]*Status
	published []dataplane.BackendRef
	// publishedOnce: a set was published. Until then the data path's set
	// is unknown (empty when fresh, a predecessor's when adopted): the
	// first non-empty set is written at once, an empty one only once the
	// first sync is over (settled), so that an adopted set keeps serving
	// new connections while neighbours resolve.
	publishedOnce, settled bool
	provErr                error
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
	m := &Manager{prov: p, res: r, pub: pub, opts: o, reg: newRegistry(o.InUse),
		synced: make(chan struct{}), backends: map[netip.Addr]*Status{}}
	for _, k := range o.Known {
		if err := m.reg.adopt(k.ID, k.IP); err != nil {
			o.Log.WithFields(logrus.Fields{"backend": k.Name, "ip": k.IP}).WithError(err).Warn("adopted backend id skipped")
			continue
		}
		name := k.Name
		if name == "" {
			name = k.IP.String()
		}
		m.backends[k.IP] = &Status{ID: k.ID, Name: name, IP: k.IP, State: Departed}
	}
	return m
}

// Synced is closed once the provider's first set has been resolved (each
// backend routable, unreachable, or still pending after PendingWait) and
// the routable set published.
func (m *Manager) Synced() <-chan struct{} { return m.synced }

// ProviderName names the provider.
func (m *Manager) ProviderName() string { return m.prov.Name() }

// ProviderError is the provider's last error, nil while it is healthy.
func (m *Manager) ProviderError() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.provErr
}

// Snapshot returns every backend known to this process, ordered by id.
func (m *Manager) Snapshot() []Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Status, 0, len(m.backends))
	for _, s := range m.backends {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b Status) int { return int(a.ID) - int(b.ID) })
	return out
}

// Run runs the provider and the resolution loop until ctx ends.
func (m *Manager) Run(ctx context.Context) error {
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

// apply takes a provider set: new backends get ids, departed ones are marked.
func (m *Manager) apply(set []Backend) {
	m.mu.Lock()
	defer m.mu.Unlock()
	current := map[netip.Addr]bool{}
	for _, b := range set {
		current[b.IP] = true
	}
	for ip, s := range m.backends {
		if !current[ip] && s.Discovered {
			s.Discovered, s.State, s.Reason = false, Departed, ""
			m.opts.Log.WithFields(logrus.Fields{"backend": s.Name, "ip": ip}).Info("backend left discovery; existing connections stay pinned to it")
		}
	}
	for _, b := range set {
		s, ok := m.backends[b.IP]
		if !ok {
			id, err := m.reg.id(b.IP, current)
			if err != nil {
				m.opts.Log.WithFields(logrus.Fields{"backend": b.Name, "ip": b.IP}).WithError(err).Error("backend skipped")
				continue
			}
			s = &Status{ID: id, IP: b.IP, State: Unreachable, Reason: "not resolved yet"}
			m.backends[b.IP] = s
		}
		s.Name, s.Discovered = b.Name, true
		if s.State == Departed {
			s.State, s.Reason = Unreachable, "not resolved yet"
		}
	}
}

// resolveAll resolves unresolved backends (all of them when full), waiting
// up to PendingWait for neighbours in flight during a full pass, then
// publishes the routable set if it changed.
func (m *Manager) resolveAll(ctx context.Context, full bool) {
	wait := full
	deadline := time.Now().Add(m.opts.PendingWait)
	for {
		pending := false
		for _, ip := range m.candidates(full) {
			route, err := m.res.Resolve(ip)
			m.record(ip, route, err)
			if errors.Is(err, hostnet.ErrNeighbourPending) {
				pending = true
			}
		}
		m.publish()
		if !pending || !wait || time.Now().After(deadline) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
		full = false // retry only the unresolved ones
	}
}

func (m *Manager) candidates(full bool) []netip.Addr {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []netip.Addr
	for ip, s := range m.backends {
		if s.Discovered && (full || s.State != Routable) {
			out = append(out, ip)
		}
	}
	return out
}

// record stores a resolution result. A backend that stops being routable
// is logged once, when the reason is known (not while its neighbour is
// still being resolved), and again only after it was routable in between:
// a next hop that never answers ARP alternates between "pending" and
// "failed" every few seconds while the kernel retries, and that is one
// story, not a new one every time.
func (m *Manager) record(ip netip.Addr, route hostnet.Route, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.backends[ip]
	if !ok || !s.Discovered {
		return
	}
	log := m.opts.Log.WithFields(logrus.Fields{"backend": s.Name, "ip": ip})
	if err == nil {
		if s.State != Routable {
			log.WithFields(logrus.Fields{"interface": route.Interface, "next_hop": route.NextHop}).Info("backend routable")
		}
		s.State, s.Reason, s.Route, s.warned = Routable, "", route, false
		return
	}
	s.State, s.Reason = Unreachable, err.Error()
	if errors.Is(err, hostnet.ErrNeighbourPending) {
		log.WithError(err).Debug("backend not routable yet; retrying")
		return
	}
	if !s.warned {
		log.WithError(err).Warn("backend unreachable; skipped for new connections and retried")
		s.warned = true
	}
}

// publish sends the routable set to the data path when it changed.
func (m *Manager) publish() {
	m.mu.Lock()
	var refs []dataplane.BackendRef
	for _, s := range m.backends {
		if s.Discovered && s.State == Routable {
			refs = append(refs, dataplane.BackendRef{ID: s.ID, IP: s.IP})
		}
	}
	slices.SortFunc(refs, func(a, b dataplane.BackendRef) int { return int(a.ID) - int(b.ID) })
	same := m.publishedOnce && slices.Equal(refs, m.published)
	early := !m.publishedOnce && len(refs) == 0 && !m.settled
	m.mu.Unlock()
	if same || early {
		return
	}
	if err := m.pub.SetRoutable(refs); err != nil {
		m.opts.Log.WithError(err).Error("publish routable backends")
		return
	}
	m.mu.Lock()
	m.published, m.publishedOnce = refs, true
	m.mu.Unlock()
	m.opts.Log.WithField("routable", len(refs)).Info("routable backend set published")
}

// Republish writes the routable set to the data path again, even when it
// did not change: after a failed hot upgrade whose successor may have
// published its own.
func (m *Manager) Republish() {
	m.mu.Lock()
	m.publishedOnce = false
	m.mu.Unlock()
	m.publish()
}
