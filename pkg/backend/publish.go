package backend

import (
	"slices"

	"github.com/xlbproject/xlb/pkg/dataplane"
)

// publish sends the routable set to the data path when it changed.
func (m *Manager) publish() {
	m.pubMu.Lock()
	defer m.pubMu.Unlock()
	m.publishLocked()
}

// publishLocked is publish with m.pubMu held (not m.mu).
func (m *Manager) publishLocked() {
	m.mu.Lock()
	var refs []dataplane.BackendRef
	for _, s := range m.backends {
		if s.Discovered && s.State == Routable {
			refs = append(refs, dataplane.BackendRef{ID: s.ID, IP: s.IP, Port: s.Port})
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
	select {
	case m.changed <- struct{}{}:
	default:
	}
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
