package backend

import "time"

// IDReuseQuiet is how long a departed backend's id stays its own after the
// later of its departure and the last maintenance sample that counted a
// pair toward it: longer than the data path's time-wait (60 s, seed
// "Orderly close and reset") and the SNAT hold a replaced pair leaves
// behind (60 s after the backend's FIN, issue 13), so no entry of any kind
// names the id when it is reused, plus slack for the sample period.
const IDReuseQuiet = 2 * time.Minute

// Clock is the manager's time source for id reuse (tests pass their own).
type Clock interface{ Now() time.Time }

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// idleness is what the maintenance samples said about each id's pairs.
type idleness struct {
	lastBusy   map[uint32]time.Time // the latest sample that counted a pair toward the id
	lastSample time.Time            // the latest sample at all; zero before the first
}

func newIdleness() idleness { return idleness{lastBusy: map[uint32]time.Time{}} }

func (i *idleness) forget(id uint32) { delete(i.lastBusy, id) }

// NotePairs records a maintenance sample taken at at: busy are the backend
// ids it counted pairs toward (active, time-wait or resetting). The daemon
// calls it for every sample; ids of departed backends become reusable
// IDReuseQuiet after they were last busy.
func (m *Manager) NotePairs(at time.Time, busy []uint32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range busy {
		m.idle.lastBusy[id] = at
	}
	if at.After(m.idle.lastSample) {
		m.idle.lastSample = at
	}
}

// idInUse is the registry's test for reuse: an id is in use unless its
// backend departed and a sample taken IDReuseQuiet after both the
// departure and the id's last busy sample has been seen. Without samples
// nothing is reusable. The caller holds m.mu.
func (m *Manager) idInUse(id uint32) bool {
	ip, ok := m.reg.byID[id]
	if !ok {
		return false
	}
	s, ok := m.backends[ip]
	if !ok {
		return false // an adopted id whose adoption was skipped: nothing known references it
	}
	if s.Discovered || s.departedAt.IsZero() {
		return true
	}
	quietFrom := s.departedAt
	if b, ok := m.idle.lastBusy[id]; ok && b.After(quietFrom) {
		quietFrom = b
	}
	return m.idle.lastSample.Before(quietFrom.Add(IDReuseQuiet))
}
