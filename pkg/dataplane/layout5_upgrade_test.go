package dataplane_test

import (
	"testing"

	"github.com/xlbproject/xlb/pkg/dataplane"
)

// A hot upgrade from the issue-17 build (layout 5: a smaller counter array
// and config, the SYN's time left in syn_us): a start that finds its pins
// migrates them, every pair keeps every field and forwards both ways,
// every counter keeps its count and the new ones start at 0, the config
// gets the SNAT reuse guard when this build configures it, and Pin leaves
// pins of this layout, which the next start adopts as they are.
func TestHotUpgradeFromLayout5(t *testing.T) {
	l := newPinLab(t)
	const pairs = 3
	dp, after := l.upgradedFrom(t, 5, pairs, func(dir string) { dataplane.DowngradeToLayout5(t, dir, 12345) }) // embryonic pairs: syn_us is the SYN's time in both layouts
	guard, err := dp.FixtureSNATReuseTicks()
	if err != nil || guard == 0 {
		t.Errorf("SNAT reuse guard in the migrated config: %d ticks (%v), want this build's", guard, err)
	}
	l.forwardsAfterMigration(t, dp, after, pairs)
	l.adoptedAfterPin(t, dp, pairs, nil)
}
