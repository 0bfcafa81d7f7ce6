package backend

import (
	"cmp"
	"slices"

	"github.com/sirupsen/logrus"

	"github.com/xlbproject/xlb/pkg/sched"
)

// compareRefs orders a routable set by member id.
func compareRefs(a, b Ref) int { return cmp.Compare(a.Member, b.Member) }

// publish sends the service's routable set to the data path when it
// changed.
func (m *Manager) publish() {
	m.pubMu.Lock()
	defer m.pubMu.Unlock()
	m.publishLocked()
}

// publishLocked is publish with m.pubMu held (not m.mu). The refs carry
// each backend's name and weight, which the table schedulers build from
// (dataplane.BackendRef): a change of either publishes again, and the
// data path rebuilds the service's table. Nothing is published while the
// inherited set is kept (Manager.inheriting).
func (m *Manager) publishLocked() {
	m.mu.Lock()
	if m.inheriting {
		m.mu.Unlock()
		return
	}
	var refs []Ref
	for _, s := range m.backends {
		if s.Discovered && s.State == Routable {
			refs = append(refs, Ref{ID: s.Backend, Member: s.ID, IP: s.IP, Port: s.Port, Name: s.Name, Weight: s.Weight})
		}
	}
	slices.SortFunc(refs, compareRefs)
	same := m.publishedOnce && slices.Equal(refs, m.published)
	early := !m.publishedOnce && len(refs) == 0 && !m.settled
	m.mu.Unlock()
	if same || early {
		return
	}
	if err := m.pub.SetRoutable(m.opts.ServiceID, refs); err != nil {
		m.opts.Log.WithError(err).Error("publish routable backends")
		return
	}
	m.mu.Lock()
	m.published, m.publishedOnce = refs, true
	was := m.overfull
	m.overfull = m.opts.MaglevTableSize > 0 && uint64(len(refs))*sched.MinSlotsPerMember > uint64(m.opts.MaglevTableSize)
	m.mu.Unlock()
	m.opts.Log.WithField("routable", len(refs)).Info("routable backend set published")
	if m.overfull && !was {
		m.opts.Log.WithFields(logrus.Fields{"routable": len(refs), "table_size": m.opts.MaglevTableSize}).
			Warnf("Maglev table overfull: fewer than %d slots per routable backend, so removing one moves more than about 1 %% of the other clients; set a larger maglev.table_size", sched.MinSlotsPerMember)
	}
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// Republish writes the routable set to the data path again, even when it
// did not change: after a failed hot upgrade whose successor may have
// published its own. While the inherited set is kept (the provider has
// not sent its first set) it writes nothing: see Manager.inheriting.
func (m *Manager) Republish() {
	m.mu.Lock()
	m.publishedOnce = false
	m.mu.Unlock()
	m.publish()
}
