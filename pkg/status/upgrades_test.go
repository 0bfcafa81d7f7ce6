package status

import (
	"testing"

	"github.com/xlbproject/xlb/pkg/snapshot"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// TestDocumentUpgrades: the served upgrades object mirrors
// snapshot.Upgrades for each way a process takes the data path (DESIGN §6),
// every field present, last_failure "" when nothing failed.
func TestDocumentUpgrades(t *testing.T) {
	for _, c := range []struct {
		name string
		snap *snapshot.Snapshot
		want map[string]any
	}{
		{"handed over, one failure since", fixture(), map[string]any{
			"upgrades.start": "handed_over", "upgrades.adopted_pairs": float64(29),
			"upgrades.ok": float64(3), "upgrades.failed": float64(1),
			"upgrades.last_failure": `new process exited with status 1: config: xlb.yaml:4: unknown field "prots"`,
		}},
		{"fresh", clone(func(s *snapshot.Snapshot) { s.Upgrades = snapshot.Upgrades{Start: api.StartFresh} }), map[string]any{
			"upgrades.start": "fresh", "upgrades.adopted_pairs": float64(0),
			"upgrades.ok": float64(0), "upgrades.failed": float64(0), "upgrades.last_failure": "",
		}},
		{"adopted after a crash", clone(func(s *snapshot.Snapshot) {
			s.Upgrades = snapshot.Upgrades{Start: api.StartAdopted, AdoptedPairs: 250, OK: 5}
		}), map[string]any{
			"upgrades.start": "adopted", "upgrades.adopted_pairs": float64(250),
			"upgrades.ok": float64(5), "upgrades.failed": float64(0), "upgrades.last_failure": "",
		}},
		{"migrated", clone(func(s *snapshot.Snapshot) {
			s.Upgrades = snapshot.Upgrades{Start: api.StartMigrated, AdoptedPairs: 7, OK: 2, Failed: 2}
		}), map[string]any{
			"upgrades.start": "migrated", "upgrades.adopted_pairs": float64(7),
			"upgrades.ok": float64(2), "upgrades.failed": float64(2),
		}},
		// Before anything is published the start is not known yet.
		{"nothing published", nil, map[string]any{
			"upgrades.start": "", "upgrades.adopted_pairs": float64(0),
			"upgrades.ok": float64(0), "upgrades.failed": float64(0), "upgrades.last_failure": "",
		}},
	} {
		wantServed(t, c.name, c.snap, c.want)
	}
}

// TestDocumentHandingOver: while the old process hands over (SIGUSR2), the
// document says handing_over and everything else reads as running: no
// shutdown object, routable backends still take new connections.
func TestDocumentHandingOver(t *testing.T) {
	d := Build(clone(func(s *snapshot.Snapshot) { s.Lifecycle = api.HandingOver }), fixedNow)
	if d.Lifecycle != "handing_over" || d.Shutdown != nil {
		t.Errorf("lifecycle %q shutdown %+v, want handing_over without a shutdown object", d.Lifecycle, d.Shutdown)
	}
	for _, b := range d.Backends {
		if want := b.State == api.Routable; b.AvailableForNewConnections != want {
			t.Errorf("backend %s (%s): available_for_new_connections %v, want %v", b.Name, b.State, b.AvailableForNewConnections, want)
		}
	}
}
