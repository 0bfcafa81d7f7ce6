package dataplane_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// wantPath is the path each feature state must lead to.
func wantPath(f dataplane.Feature, state string) string {
	switch f {
	case dataplane.FeatureBatchOps:
		if state == dataplane.StateAvailable {
			return dataplane.PathBatchLookup
		}
		return dataplane.PathPerKey
	case dataplane.FeatureXDPLink:
		switch state {
		case dataplane.StateAvailable:
			return dataplane.PathBPFLink
		case dataplane.StateUnknown:
			return dataplane.PathNotAttached
		}
		return dataplane.PathNetlink
	case dataplane.FeatureRingBuf:
		if state == dataplane.StateAvailable {
			return dataplane.PathRingBuffer
		}
		return dataplane.PathPerCPUQueue
	case dataplane.FeaturePinning:
		if state == dataplane.StateAvailable {
			return dataplane.PathPinned
		}
		return dataplane.PathUnpinned
	}
	return dataplane.PathNotUsed
}

func checkFeatures(t *testing.T, fs dataplane.Features) {
	t.Helper()
	if len(fs) != len(dataplane.AllFeatures) {
		t.Fatalf("features %v: want one entry per feature %v", fs, dataplane.AllFeatures)
	}
	for i, f := range fs {
		if f.Name != dataplane.AllFeatures[i] {
			t.Errorf("feature %d is %s, want %s", i, f.Name, dataplane.AllFeatures[i])
		}
		if f.Path != wantPath(f.Name, f.State) {
			t.Errorf("%s: state %s with path %s, want %s", f.Name, f.State, f.Path, wantPath(f.Name, f.State))
		}
		if off := f.State == dataplane.StateRefused || f.State == dataplane.StateDisabled; off != (f.Detail != "") {
			t.Errorf("%s: state %s with detail %q", f.Name, f.State, f.Detail)
		}
	}
}

// xdpProgID is the id of the XDP program attached to ifname (0: none).
func xdpProgID(e *dt.Env, ifname string) (uint32, error) {
	var id uint32
	err := e.Do(func() error {
		l, err := netlink.LinkByName(ifname)
		if err != nil {
			return err
		}
		if x := l.Attrs().Xdp; x != nil && x.Attached {
			id = x.ProgId
		}
		return nil
	})
	return id, err
}

// attachment returns the environment's attachment of ifname.
func attachment(t *testing.T, e *dt.Env, ifname string) dataplane.Attachment {
	t.Helper()
	for _, a := range e.DP.Attachments() {
		if a.Interface == ifname {
			return a
		}
	}
	t.Fatalf("%s is not attached", ifname)
	return dataplane.Attachment{}
}

// The probes report every feature with a path that matches its state, and
// the XDP link stays unknown until the first attach settles it.
func TestFeaturesProbed(t *testing.T) {
	testnet.RequireRoot(t)
	dp, err := dataplane.Load(dataplane.Options{SNAT: dt.SNATSpace, MaxConnections: 16})
	if err != nil {
		t.Fatal(err)
	}
	fs := dp.Features()
	dp.Close()
	checkFeatures(t, fs)
	if st := fs.Get(dataplane.FeatureXDPLink).State; st != dataplane.StateUnknown {
		t.Errorf("XDP link before any attach: %s, want unknown", st)
	}

	e := dt.NewEnv(t, dt.Options{})
	fs = e.DP.Features()
	checkFeatures(t, fs)
	t.Logf("features: %s", fs.Summary())
	a := attachment(t, e, e.Front.Name)
	if a.Via != wantPath(dataplane.FeatureXDPLink, fs.Get(dataplane.FeatureXDPLink).State) {
		t.Errorf("attached via %s while the XDP link is %s", a.Via, fs.Get(dataplane.FeatureXDPLink).State)
	}
	if id, err := xdpProgID(e, e.Front.Name); err != nil || id == 0 || id != a.ProgID {
		t.Errorf("attached program id %d (%v), attachment says %d", id, err, a.ProgID)
	}
}

// Each optional feature turned off in turn: the program still balances a
// SYN, the feature reports "disabled" with its fallback path, and the
// fallback works (flow map reads key by key, XDP attach through netlink).
func TestFeatureFallbacks(t *testing.T) {
	for _, f := range dataplane.AllFeatures {
		t.Run(string(f), func(t *testing.T) {
			e := dt.NewEnv(t, dt.Options{Disable: []dataplane.Feature{f}})
			fs := e.DP.Features()
			checkFeatures(t, fs)
			if st := fs.Get(f); st.State != dataplane.StateDisabled {
				t.Fatalf("%s: %+v, want disabled", f, st)
			}
			for i := range 5 {
				e.MustRun(t, synFrom(e, dt.Client(uint16(34000+i)), 80).Frame(), e.Front, dt.XDPTX)
			}
			// The flow map reads back whole on whichever path is taken.
			w := e.DP.NewFlowWalk(3)
			total := 0
			for {
				n, end, err := w.Next()
				if err != nil {
					t.Fatal(err)
				}
				total += n
				if end {
					break
				}
			}
			if total != 10 {
				t.Errorf("read %d flow entries, want 10 (5 pairs)", total)
			}
			// Close events come through the path the ring buffer's state chose.
			ev, err := e.DP.OpenCloseEvents()
			if err != nil {
				t.Fatal(err)
			}
			if got, want := ev.Path(), wantPath(dataplane.FeatureRingBuf, fs.Get(dataplane.FeatureRingBuf).State); got != want {
				t.Errorf("close events through %s, want %s", got, want)
			}
			// the client gives up on its first attempt: a RST of its SYN's sequence + 1
			e.MustRun(t, e.FromClient(dt.Client(34000), 80, dt.RST, 1001, 0, nil).Frame(), e.Front, dt.XDPTX)
			var got []closeRecord
			record := func(c *dataplane.CloseEvent) {
				got = append(got, closeRecord{Key: c.Key, Kind: dataplane.CloseKind(c.Kind)})
			}
			if _, _, err := ev.Drain(record); err != nil {
				t.Fatal(err)
			}
			var wantEv []closeRecord
			for i := range 5 {
				wantEv = append(wantEv, closeRecord{Key: dt.ForwardKey(dt.Client(uint16(34000+i)), 80), Kind: dataplane.CloseOpen})
			}
			wantEv = append(wantEv, closeRecord{Key: dt.ForwardKey(dt.Client(34000), 80), Kind: dataplane.CloseRST})
			if !sameRecords(got, wantEv) {
				t.Errorf("close events after five SYNs and one RST: %v, want %v in any order", got, wantEv)
			}
			ev.Close()
			a := attachment(t, e, e.Front.Name)
			want := dataplane.PathBPFLink
			if f == dataplane.FeatureXDPLink {
				want = dataplane.PathNetlink
			}
			if a.Via != want {
				t.Errorf("attached via %s, want %s", a.Via, want)
			}
			if id, err := xdpProgID(e, e.Front.Name); err != nil || id != a.ProgID {
				t.Errorf("attached program id %d (%v), attachment says %d", id, err, a.ProgID)
			}
			if err := e.Do(func() error { return e.DP.Detach(e.Front.Name) }); err != nil {
				t.Fatal(err)
			}
			if id, err := xdpProgID(e, e.Front.Name); err != nil || id != 0 {
				t.Errorf("after detach: program id %d (%v), want none", id, err)
			}
		})
	}
}

// A program attached through netlink outlives its process. A successor
// told about it (Options.StaleXDP, from the host settings journal)
// replaces it in place, in its mode (a strict other mode is refused); a
// data path that was not told refuses the interface as taken rather than
// replace a stranger's program.
func TestStaleNetlinkProgram(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{Disable: []dataplane.Feature{dataplane.FeatureXDPLink}})
	old := attachment(t, e, e.Front.Name)
	load := func(stale map[string]uint32) *dataplane.Dataplane {
		dp, err := dataplane.Load(dataplane.Options{SNAT: dt.SNATSpace, MaxConnections: 16, StaleXDP: stale})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Do(dp.Close) })
		return dp
	}
	stranger := load(nil)
	err := e.Do(func() error { _, err := stranger.Attach(e.Front.Name, dataplane.ModeNative); return err })
	if err == nil || !strings.Contains(err.Error(), "another XDP program is attached") {
		t.Fatalf("attach over another program: %v, want a refusal naming the attached program", err)
	}
	successor := load(map[string]uint32{e.Front.Name: old.ProgID})
	err = e.Do(func() error { _, err := successor.Attach(e.Front.Name, dataplane.ModeNative); return err })
	if err == nil || !strings.Contains(err.Error(), "restart xlb") {
		t.Fatalf("native attach over a generic-mode predecessor: %v, want a refusal that names the restart", err)
	}
	if id, _ := xdpProgID(e, e.Front.Name); id != old.ProgID {
		t.Fatalf("after the refused attach: program %d, want the predecessor's %d still attached", id, old.ProgID)
	}
	var a *dataplane.Attachment
	if err := e.Do(func() (err error) { a, err = successor.Attach(e.Front.Name, dataplane.ModeAuto); return err }); err != nil {
		t.Fatalf("successor attach: %v", err)
	}
	if !a.Adopted || a.Mode != dataplane.ModeGeneric || a.Via != dataplane.PathNetlink {
		t.Errorf("successor attachment %+v, want adopted in generic mode through netlink", *a)
	}
	if id, err := xdpProgID(e, e.Front.Name); err != nil || id != a.ProgID || id == old.ProgID {
		t.Fatalf("attached program %d (%v): want the successor's %d, not the stale %d", id, err, a.ProgID, old.ProgID)
	}
	// The predecessor's stop must not detach its successor's program.
	if err := e.Do(func() error { return e.DP.Detach(e.Front.Name) }); err != nil {
		t.Fatal(err)
	}
	if id, _ := xdpProgID(e, e.Front.Name); id != a.ProgID {
		t.Fatalf("after the predecessor's detach: program %d, want the successor's %d", id, a.ProgID)
	}
}

func TestParseFeatures(t *testing.T) {
	got, err := dataplane.ParseFeatures(" ring_buffer,,xdp_bpf_link , ring_buffer")
	if err != nil || len(got) != 2 || got[0] != dataplane.FeatureRingBuf || got[1] != dataplane.FeatureXDPLink {
		t.Fatalf("got %v, %v", got, err)
	}
	if _, err := dataplane.ParseFeatures("ringbuf"); err == nil || !strings.Contains(err.Error(), `unknown kernel feature "ringbuf"`) ||
		!strings.Contains(err.Error(), "batch_map_ops") {
		t.Fatalf("unknown name: %v", err)
	}
}

// Linux capability numbers (linux/capability.h).
const (
	capSysAdmin = 21
	capPerfmon  = 38
)

// The data path loads, and its clock runs, with CAP_BPF and CAP_NET_ADMIN
// but neither CAP_PERFMON nor CAP_SYS_ADMIN: the verifier's rules for
// unprivileged pointers (Spectre mitigations) hold for the whole program.
// Capabilities are per thread, so the test drops them on a locked thread
// that dies with its goroutine.
func TestLoadsWithoutPerfmon(t *testing.T) {
	testnet.RequireRoot(t)
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			errc <- err
			return
		}
		for _, c := range []uint{capSysAdmin, capPerfmon} {
			data[c/32].Effective &^= 1 << (c % 32)
		}
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			errc <- err
			return
		}
		// Both close event paths are verified: the loader turns the
		// other one into dead code, so each is a different program.
		for _, disable := range [][]dataplane.Feature{nil, {dataplane.FeatureRingBuf}} {
			if err := loadAndRun(disable); err != nil {
				errc <- fmt.Errorf("disabled %v: %w", disable, err)
				return
			}
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		t.Fatalf("load without CAP_PERFMON and CAP_SYS_ADMIN: %v", err)
	}
}

// loadAndRun loads the data path and runs its userspace-driven programs
// once: the clock, the reaper and a close event reader.
func loadAndRun(disable []dataplane.Feature) error {
	dp, err := dataplane.Load(dataplane.Options{SNAT: dt.SNATSpace, MaxConnections: 64, RandomSNATCursors: true, Disable: disable})
	if err != nil {
		return err
	}
	defer dp.Close()
	now, err := dp.KernelNow()
	if err != nil {
		return err
	}
	reqs := []dataplane.ReapRequest{{Key: dt.ForwardKey(dt.Client(33000), 80), Generation: 1, Op: dataplane.ReapCheck}}
	if err := dp.Reap(reqs, dataplane.ReapClock{Now: now}); err != nil {
		return err
	}
	if reqs[0].Result != dataplane.ReapGone {
		return fmt.Errorf("reap of a missing entry: result %d, want gone", reqs[0].Result)
	}
	ev, err := dp.OpenCloseEvents()
	if err != nil {
		return err
	}
	defer ev.Close()
	_, _, err = ev.Drain(func(*dataplane.CloseEvent) {})
	return err
}
