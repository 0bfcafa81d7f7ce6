package dataplane_test

import (
	"testing"

	"github.com/xlbproject/xlb/pkg/dataplane"
)

// A hot upgrade from the issue-27 build of f2593f4 (layout 6: generation
// and flags after nexthop, a shorter counter array): a start that finds
// its pins migrates them, every pair keeps every field and forwards both
// ways, every counter keeps its count and the new one starts at 0, and
// Pin leaves pins of this layout, which the next start adopts as they
// are.
func TestHotUpgradeFromLayout6(t *testing.T) {
	l := newPinLab(t)
	const pairs = 3
	dp, after := l.upgradedFrom(t, 6, pairs, func(dir string) { dataplane.DowngradeToLayout6(t, dir) })
	l.forwardsAfterMigration(t, dp, after, pairs)
	l.adoptedAfterPin(t, dp, pairs, nil)
}
