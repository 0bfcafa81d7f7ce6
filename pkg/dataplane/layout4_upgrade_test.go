package dataplane_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/xlbproject/xlb/pkg/dataplane"
)

// A hot upgrade from the issue-14 build (layout 4, no destination MAC
// check): a start that finds its pins migrates them, every pair keeps
// every field and forwards both ways, every counter keeps its count and
// the new one (NotOurs) starts at 0; Pin leaves pins of this layout,
// which the next start adopts as they are, and never pins the
// interfaces' MACs (written at every attach).
func TestHotUpgradeFromLayout4(t *testing.T) {
	l := newPinLab(t)
	const pairs = 3
	dp, after := l.upgradedFrom(t, 4, pairs, func(dir string) { dataplane.DowngradeToLayout4(t, dir) })
	l.forwardsAfterMigration(t, dp, after, pairs)
	l.adoptedAfterPin(t, dp, pairs, func() {
		if _, err := os.Stat(filepath.Join(l.dir, "maps", "xlb_if_macs")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the interfaces' MACs are pinned (%v), want them never pinned", err)
		}
	})
}
