package instance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/test/lab"
)

// Detach takes down what a crashed instance left (issue 28): refused while
// an instance holds the namespace's lock, it then detaches the program
// (a pinned XDP link, or one attached through netlink that the journal
// records), removes every pin, the managed neighbours and the journal,
// and writes the sysctls back, so that a connection the crashed
// instance's pins kept forwarding stops being forwarded. A second Detach
// finds nothing.
func TestDetachAfterACrash(t *testing.T) {
	for _, c := range []struct {
		name    string
		disable []dataplane.Feature
	}{
		{"pinned link", nil},
		{"netlink", []dataplane.Feature{dataplane.FeatureXDPLink}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := lab.New(t, lab.Options{Topology: lab.OneArm})
			cfg := pinnedConfig(t, l)
			dir := t.TempDir()
			before := readHost(t, l)

			var in *Instance
			err := l.XLB.Do(func() error {
				var err error
				in, err = Start(context.Background(), cfg, Options{Log: quietLog(), JournalDir: dir, Disable: c.disable})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			running := readHost(t, l)
			if err := l.XLB.Do(func() error { _, err := Detach(cfg.StateDir, dir); return err }); !errors.Is(err, ErrRunning) {
				l.XLB.Do(in.Stop)
				t.Fatalf("Detach while the instance runs: %v, want ErrRunning", err)
			}
			if got := readHost(t, l); fmt.Sprint(got) != fmt.Sprint(running) {
				t.Fatalf("the refused Detach changed the host: %+v, was %+v", got, running)
			}

			conn, r := crashWithConnection(t, l, in)

			var d Detached
			if err := l.XLB.Do(func() error { d, err = Detach(cfg.StateDir, dir); return err }); err != nil {
				t.Fatalf("Detach after the crash: %v", err)
			}
			t.Logf("Detach: %s", d)
			wantLinks, wantNetlink := []string{"eth0"}, []string(nil)
			if c.disable != nil {
				wantLinks, wantNetlink = nil, []string{"eth0"}
			}
			if !slices.Equal(d.Links, wantLinks) || !slices.Equal(d.NetlinkXDP, wantNetlink) || d.Pins == 0 ||
				d.Neighbours < len(l.Backends) || len(d.Sysctls) != 2 {
				t.Errorf("Detach took down %+v, want links %v, netlink %v, pins, %d neighbours and both sysctls", d, wantLinks, wantNetlink, len(l.Backends))
			}
			if after := readHost(t, l); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("after Detach the host is %+v, want it as before the start: %+v", after, before)
			}
			if _, err := os.Stat(cfg.StateDir); !os.IsNotExist(err) {
				t.Errorf("state_dir after Detach: %v, want it removed", err)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
				t.Errorf("journal directory after Detach holds %v, want nothing", left)
			}
			// The connection the pins kept forwarding is not forwarded any
			// more: its next line gets no echo.
			conn.SetDeadline(time.Now().Add(2 * time.Second))
			if _, err := fmt.Fprintln(conn, "after the detach"); err == nil {
				if got, err := r.ReadString('\n'); err == nil {
					t.Errorf("the connection still echoes %q after Detach", got)
				}
			}

			if err := l.XLB.Do(func() error { d, err = Detach(cfg.StateDir, dir); return err }); err != nil || !d.Empty() {
				t.Errorf("a second Detach: %+v, %v; want nothing to take down", d, err)
			}
		})
	}
}
