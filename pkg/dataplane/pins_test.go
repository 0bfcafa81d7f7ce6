package dataplane_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// A restart that finds pins of its own layout and max_connections adopts
// them: every pair forwards as before, the counters, the hand-off counts
// and the round-robin position continue. Release leaves everything
// pinned; Close removes state_dir.
func TestAdoptPins(t *testing.T) {
	l := newPinLab(t)
	first := l.mustLoad(t, 1024)
	if ad := first.Adoption(); ad.Start != api.StartFresh || ad.Backends != nil {
		t.Fatalf("first load: %+v, want fresh", ad)
	}
	if f := first.Features().Get(dataplane.FeaturePinning); f.State != dataplane.StateAvailable || f.Path != dataplane.PathPinned {
		t.Fatalf("pinning: %v", f)
	}
	l.configure(t, first)
	l.open(t, first, 0, 2) // round robin: backends 0 and 1
	out := l.run(t, first, l.data(0), dt.XDPTX)
	counters, err := first.Counters()
	if err != nil {
		t.Fatal(err)
	}
	before := flows(t, first)
	if err := first.SetShutdown(true); err != nil { // it died in its shutdown window
		t.Fatal(err)
	}
	if err := first.Pin(dataplane.PinMeta{OwnerPID: 4242}); err != nil {
		t.Fatal(err)
	}
	for _, ok := range []bool{true, true, false} {
		if err := first.CountHotUpgrade(ok); err != nil {
			t.Fatal(err)
		}
	}
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"meta", "maps/xlb_flows", "maps/xlb_counters", "maps/xlb_shared", "maps/xlb_cfg"} {
		if _, err := os.Stat(filepath.Join(l.dir, p)); err != nil {
			t.Errorf("after Release: %v", err)
		}
	}

	next := l.mustLoad(t, 1024)
	ad := next.Adoption()
	wantBackends := map[uint32]string{0: l.refs[0].IP.String(), 1: l.refs[1].IP.String(), 2: l.refs[2].IP.String()}
	if ad.Start != api.StartAdopted || ad.FromLayout != dataplane.LayoutVersion || ad.FromMaxConnections != 1024 || ad.OwnerPID != 4242 || ad.Pairs != 2 || !ad.ShutdownFlag {
		t.Errorf("adoption %+v", ad)
	}
	for id, ip := range wantBackends {
		if ad.Backends[id].String() != ip {
			t.Errorf("adopted backends %v, want %v", ad.Backends, wantBackends)
		}
	}
	if got, _ := next.Counters(); got != counters {
		t.Errorf("adopted counters %+v, want %+v", got, counters)
	}
	if ok, failed, err := next.HotUpgrades(); ok != 2 || failed != 1 || err != nil {
		t.Errorf("hot upgrades %d/%d (%v), want 2/1", ok, failed, err)
	}
	if got := flows(t, next); !mapsEqual(got, before) {
		t.Errorf("adopted flows differ: %d entries, want %d", len(got), len(before))
	}
	// Configure alone: the pinned routable set stays active, the
	// shutdown flag goes.
	if _, err := next.Configure(l.e.Settings); err != nil {
		t.Fatal(err)
	}
	if got := l.run(t, next, l.data(0), dt.XDPTX); !bytes.Equal(got, out) {
		t.Errorf("an adopted pair forwards differently:\n%s", dt.Diff(got, out))
	}
	l.open(t, next, 2, 1)
	third := flows(t, next)[dt.ForwardKey(dt.Client(34002), 80)]
	if third.BackendId != 2 {
		t.Errorf("the first new pair after adoption went to backend %d, want 2 (the round robin continues)", third.BackendId)
	}
	if err := next.Pin(dataplane.PinMeta{OwnerPID: 4343}); err != nil {
		t.Fatal(err)
	}
	if ok, failed, _ := next.HotUpgrades(); ok != 2 || failed != 1 {
		t.Errorf("hot upgrades after the second pin %d/%d, want 2/1", ok, failed)
	}
	if err := next.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(l.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state_dir after Close: %v, want it gone", err)
	}
}

func mapsEqual[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// Another max_connections migrates the flow map entry by entry into one
// of the new size, bigger or smaller, and the real program forwards the
// copied pairs exactly as before. A flow map too small for the entries
// fails the start and leaves the pins as they were.
func TestMigrateMaxConnections(t *testing.T) {
	l := newPinLab(t)
	first := l.pinnedWith(t, 1024, 3)
	out := l.run(t, first, l.data(1), dt.XDPTX)
	want := flows(t, first)
	if err := first.CountHotUpgrade(true); err != nil {
		t.Fatal(err)
	}
	first.Release()

	for _, step := range []struct {
		maxConn uint32
		start   api.Start
	}{{4096, api.StartMigrated}, {3, api.StartMigrated}, {3, api.StartAdopted}, {1024, api.StartMigrated}} {
		dp := l.mustLoad(t, step.maxConn)
		if ad := dp.Adoption(); ad.Start != step.start || ad.Pairs != 3 {
			t.Fatalf("max_connections %d: %+v, want %s with 3 pairs", step.maxConn, ad, step.start)
		}
		if got := dp.FlowCapacity(); got != 2*step.maxConn {
			t.Errorf("flow capacity %d, want %d", got, 2*step.maxConn)
		}
		if got := flows(t, dp); !mapsEqual(got, want) {
			t.Fatalf("max_connections %d: flows differ (%d entries, want %d)", step.maxConn, len(got), len(want))
		}
		l.configure(t, dp)
		if got := l.run(t, dp, l.data(1), dt.XDPTX); !bytes.Equal(got, out) {
			t.Errorf("max_connections %d: a migrated pair forwards differently:\n%s", step.maxConn, dt.Diff(got, out))
		}
		want = flows(t, dp) // last_seen moved
		if err := dp.Pin(dataplane.PinMeta{OwnerPID: 2}); err != nil {
			t.Fatal(err)
		}
		if ok, _, _ := dp.HotUpgrades(); ok != 1 {
			t.Errorf("max_connections %d: hot upgrades %d, want the 1 counted before", step.maxConn, ok)
		}
		dp.Release()
	}

	// 3 pairs (6 entries) do not fit 2 connections.
	snap := pinSnapshot(t, l.dir)
	_, err := l.load(2)
	if err == nil || !strings.Contains(err.Error(), l.dir) || !strings.Contains(err.Error(), "do not fit") || !strings.Contains(err.Error(), "pins are left as they are") {
		t.Fatalf("migration into a map too small: %v", err)
	}
	if got := pinSnapshot(t, l.dir); !slices.Equal(got, snap) {
		t.Errorf("pins after the failed migration: %v, want %v", got, snap)
	}
	dp := l.mustLoad(t, 1024)
	if ad := dp.Adoption(); ad.Start != api.StartAdopted || ad.Pairs != 3 {
		t.Fatalf("after the failed migration: %+v, want the pins adopted with 3 pairs", ad)
	}
	if got := flows(t, dp); !mapsEqual(got, want) {
		t.Errorf("after the failed migration: flows differ")
	}
}

// pinSnapshot lists the files under dir with the map ids they pin.
func pinSnapshot(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		m, err := ebpf.LoadPinnedMap(p, nil)
		if err != nil {
			out = append(out, p)
			return nil
		}
		defer m.Close()
		info, err := m.Info()
		if err != nil {
			return err
		}
		id, _ := info.ID()
		var raw []byte
		if filepath.Base(p) == "meta" {
			if err := m.Lookup(uint32(0), &raw); err != nil {
				return err
			}
		}
		out = append(out, fmt.Sprintf("%s:%d:%x", p, id, raw))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Pins a start cannot take over are refused with an error that names
// state_dir, what was found and what to do, and are left untouched: a
// future layout, another network namespace's, a record that is not XLB's,
// pins without a record.
func TestRefusedPins(t *testing.T) {
	l := newPinLab(t)
	l.pinnedWith(t, 64, 1).Release()
	meta := filepath.Join(l.dir, "meta")
	edit := func(off int, v uint64, size int) (restore func()) {
		m, err := ebpf.LoadPinnedMap(meta, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		var raw []byte
		if err := m.Lookup(uint32(0), &raw); err != nil {
			t.Fatal(err)
		}
		orig := bytes.Clone(raw)
		if size == 4 {
			binary.NativeEndian.PutUint32(raw[off:], uint32(v))
		} else {
			binary.NativeEndian.PutUint64(raw[off:], v)
		}
		if err := m.Update(uint32(0), raw, ebpf.UpdateExist); err != nil {
			t.Fatal(err)
		}
		return func() {
			m, err := ebpf.LoadPinnedMap(meta, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if err := m.Update(uint32(0), orig, ebpf.UpdateExist); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []struct {
		name  string
		off   int
		value uint64
		size  int
		want  []string
	}{
		{"future layout", 4, 99, 4, []string{"layout version 99", fmt.Sprintf("up to %d", dataplane.LayoutVersion), "systemctl stop xlb"}},
		{"foreign network namespace", 16, l.cookie + 1, 8, []string{"another network namespace", "own state_dir"}},
		{"not XLB's record", 0, 0x12345678, 4, []string{"not XLB's pin metadata", "magic 0x12345678"}},
		{"older layout without a conversion", 4, 1, 4, []string{"layout 1", "no conversion from layout 1 to 2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			restore := edit(c.off, c.value, c.size)
			defer restore()
			snap := pinSnapshot(t, l.dir)
			_, err := l.load(64)
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range append(c.want, l.dir, "left as they are") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if got := pinSnapshot(t, l.dir); !slices.Equal(got, snap) {
				t.Errorf("pins changed by the refused start")
			}
		})
	}
	t.Run("no record", func(t *testing.T) {
		if err := os.Rename(meta, filepath.Join(l.dir, "maps", "meta")); err != nil {
			t.Fatal(err)
		}
		_, err := l.load(64)
		if err == nil || !strings.Contains(err.Error(), "no metadata record") || !strings.Contains(err.Error(), l.dir) {
			t.Fatalf("pins without a record: %v", err)
		}
	})
}

// Pinning is an optional feature: off without a state_dir, off when the
// operator disables it (nothing is pinned), refused where no bpffs can
// be had (the instance runs unpinned).
func TestPinningFeature(t *testing.T) {
	dir := dataplane.TestStateDir(t)
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		opts    dataplane.Options
		state   string
		detail  string
		pinsDir string
	}{
		{"no state_dir", dataplane.Options{}, dataplane.StateDisabled, "no state_dir (in-process instance)", ""},
		{"disabled", dataplane.Options{StateDir: dir, Disable: []dataplane.Feature{dataplane.FeaturePinning}}, dataplane.StateDisabled, "disabled by the operator", dir},
		{"no bpffs", dataplane.Options{StateDir: filepath.Join(file, "xlb")}, dataplane.StateRefused, file, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.opts.MaxConnections = 16
			c.opts.SNAT = dt.SNATSpace
			dp, err := dataplane.Load(c.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer dp.Close()
			f := dp.Features().Get(dataplane.FeaturePinning)
			if f.State != c.state || f.Path != dataplane.PathUnpinned || !strings.Contains(f.Detail, c.detail) {
				t.Errorf("pinning: %v, want %s (%s) -> unpinned", f, c.state, c.detail)
			}
			if err := dp.Pin(dataplane.PinMeta{OwnerPID: 1}); err != nil {
				t.Fatal(err)
			}
			if c.pinsDir != "" {
				if _, err := os.Stat(c.pinsDir); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s after Pin: %v, want nothing pinned", c.pinsDir, err)
				}
			}
		})
	}
}

// EnsureBPFFS mounts a bpffs at the parent of state_dir when that is not
// one, once, and creates state_dir.
func TestEnsureBPFFS(t *testing.T) {
	dir := dataplane.TestStateDir(t) // the parent is a bpffs already
	if mounted, err := dataplane.EnsureBPFFS(dir); err != nil || mounted {
		t.Fatalf("on a bpffs: mounted %v, %v", mounted, err)
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("state_dir: %v %v", st, err)
	}
	parent := filepath.Join(t.TempDir(), "fs", "bpf")
	state := filepath.Join(parent, "xlb")
	mounted, err := dataplane.EnsureBPFFS(state)
	if mounted {
		t.Cleanup(func() { unmount(t, parent) })
	}
	if err != nil || !mounted {
		t.Fatalf("on a plain directory: mounted %v, %v", mounted, err)
	}
	if mounted, err := dataplane.EnsureBPFFS(state); err != nil || mounted {
		t.Fatalf("again: mounted %v, %v", mounted, err)
	}
	if _, err := dataplane.EnsureBPFFS("relative/xlb"); err == nil || !strings.Contains(err.Error(), "relative/xlb") {
		t.Fatalf("a relative state_dir: %v", err)
	}
	if _, err := dataplane.EnsureBPFFS(filepath.Join(parent, "xlb.web")); err == nil || !strings.Contains(err.Error(), "xlb.web") {
		t.Fatalf("a state_dir with a dot: %v", err)
	}
}

func unmount(t *testing.T, dir string) {
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
		t.Errorf("unmount %s: %v", dir, err)
	}
}

// Adopted maps keep the close event path they were pinned with: a pinned
// one-slot array (the ring buffer refused or disabled) means the per-CPU
// queues even where the successor could have a ring buffer.
func TestAdoptFollowsPinnedClosePath(t *testing.T) {
	l := newPinLab(t)
	var first *dataplane.Dataplane
	err := l.e.Do(func() (err error) {
		first, err = dataplane.Load(dataplane.Options{SNAT: dt.SNATSpace, MaxConnections: 16, StateDir: l.dir, NetnsCookie: l.cookie,
			Disable: []dataplane.Feature{dataplane.FeatureRingBuf}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Pin(dataplane.PinMeta{OwnerPID: 1}); err != nil {
		t.Fatal(err)
	}
	first.Release()
	next := l.mustLoad(t, 16)
	ev, err := next.OpenCloseEvents()
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	if ev.Path() != dataplane.PathPerCPUQueue || next.Features().Get(dataplane.FeatureRingBuf).Path != dataplane.PathPerCPUQueue {
		t.Errorf("close events through %s (feature %v), want the pinned per-CPU queues", ev.Path(), next.Features().Get(dataplane.FeatureRingBuf))
	}
}
