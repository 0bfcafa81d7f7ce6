package dataplane_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
	"github.com/xlbproject/xlb/pkg/hostnet"
)

// pinLab is a packet-fixture environment (its namespace, routes and
// neighbours, so that the real program balances SYNs) plus a state_dir on
// a private bpffs: data paths loaded there with a StateDir stand for
// successive xlb processes. They run the program with BPF_PROG_TEST_RUN;
// extra veths (addVeth) take their attachments.
type pinLab struct {
	e      *dt.Env
	dir    string
	cookie uint64
	refs   []dataplane.BackendRef
}

func newPinLab(t *testing.T) *pinLab {
	t.Helper()
	l := &pinLab{e: dt.NewEnv(t, dt.Options{}), dir: dataplane.TestStateDir(t)}
	if err := l.e.Do(func() (err error) { l.cookie, err = hostnet.NetnsCookie(); return err }); err != nil {
		t.Fatal(err)
	}
	for i, b := range l.e.Backends {
		l.refs = append(l.refs, dataplane.BackendRef{ID: uint32(i), Member: uint32(i), IP: b})
	}
	return l
}

// load loads a data path on the lab's state_dir, as a start of xlb does.
func (l *pinLab) load(maxConnections uint32) (*dataplane.Dataplane, error) {
	var dp *dataplane.Dataplane
	err := l.e.Do(func() (err error) {
		dp, err = dataplane.Load(dataplane.Options{SNAT: dt.SNATSpace, MaxConnections: maxConnections, StateDir: l.dir, NetnsCookie: l.cookie})
		return err
	})
	return dp, err
}

// mustLoad is load that fails the test on error. The data path is
// released when the test ends (a no-op after Close or Release).
func (l *pinLab) mustLoad(t *testing.T, maxConnections uint32) *dataplane.Dataplane {
	t.Helper()
	dp, err := l.load(maxConnections)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Release() })
	return dp
}

// configure writes the fixture's settings and routable set, as the
// instance does after Load.
func (l *pinLab) configure(t *testing.T, dp *dataplane.Dataplane) {
	t.Helper()
	if _, err := dp.Configure(l.e.Settings); err != nil {
		t.Fatal(err)
	}
	if err := dp.SetRoutable(0, l.refs); err != nil {
		t.Fatal(err)
	}
}

// run runs seg through dp's program as if it arrived on Front and checks the action.
func (l *pinLab) run(t *testing.T, dp *dataplane.Dataplane, seg dt.Segment, want uint32) []byte {
	t.Helper()
	act, out, err := l.e.RunProgram(dp.Program(), seg.Frame(), l.e.Front)
	if err != nil {
		t.Fatal(err)
	}
	if act != want {
		t.Fatalf("%v -> %v: %s, want %s", seg.Src, seg.Dst, dt.ActionName(act), dt.ActionName(want))
	}
	return out
}

// forwards runs seg through dp and checks that it leaves as want does
// (XDP_TX).
func (l *pinLab) forwards(t *testing.T, dp *dataplane.Dataplane, what string, seg, want dt.Segment) {
	t.Helper()
	if out := l.run(t, dp, seg, dt.XDPTX); !slices.Equal(dt.Unpadded(out), want.Unpadded()) {
		t.Errorf("%s:\n%s", what, dt.Diff(out, want.Frame()))
	}
}

// open creates n pairs from clients on ports 34000.. and returns the frame
// the program makes of a data segment of the first one.
func (l *pinLab) open(t *testing.T, dp *dataplane.Dataplane, first, n int) {
	t.Helper()
	for i := first; i < first+n; i++ {
		l.run(t, dp, synFrom(l.e, dt.Client(uint16(34000+i)), 80), dt.XDPTX)
	}
}

// pinnedWith is a data path that opened pairs connection pairs and pinned
// everything (a running xlb's state).
func (l *pinLab) pinnedWith(t *testing.T, maxConnections uint32, pairs int) *dataplane.Dataplane {
	t.Helper()
	dp := l.mustLoad(t, maxConnections)
	l.configure(t, dp)
	l.open(t, dp, 0, pairs)
	if err := dp.Pin(dataplane.PinMeta{OwnerPID: 1}); err != nil {
		t.Fatal(err)
	}
	return dp
}

// attachedTo is a data path of maxConnections attached to name+"0" of a
// new veth pair.
func (l *pinLab) attachedTo(t *testing.T, name string, maxConnections uint32) (*dataplane.Dataplane, *dataplane.Attachment) {
	t.Helper()
	l.addVeth(t, name)
	dp := l.mustLoad(t, maxConnections)
	l.configure(t, dp)
	return dp, l.attach(t, dp, name+"0")
}

// data is a data segment of the pair of client port 34000+i.
func (l *pinLab) data(i int) dt.Segment {
	return l.e.FromClient(dt.Client(uint16(34000+i)), 80, dt.ACK|dt.PSH, 1001, 1, []byte("hello"))
}

// flows reads every flow entry of dp.
func flows(t *testing.T, dp *dataplane.Dataplane) map[dataplane.FlowKey]dataplane.FlowValue {
	t.Helper()
	out := map[dataplane.FlowKey]dataplane.FlowValue{}
	w := dp.NewFlowWalk(64)
	for {
		n, end, err := w.Next()
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			out[w.Keys[i]] = w.Values[i]
		}
		if end {
			return out
		}
	}
}

// addVeth creates the veth pair name0/name1 in the lab's namespace.
func (l *pinLab) addVeth(t *testing.T, name string) {
	t.Helper()
	err := l.e.Do(func() error {
		h, err := netlink.NewHandle()
		if err != nil {
			return err
		}
		defer h.Close()
		_, err = testnet.AddVeth(testnet.VethEnd{Netlink: h, Name: name + "0"}, testnet.VethEnd{Name: name + "1"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// xdpOn is the id of the XDP program attached to ifname in the lab (0: none).
func (l *pinLab) xdpOn(t *testing.T, ifname string) uint32 {
	t.Helper()
	id, err := xdpProgID(l.e, ifname)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// linkID is the id of the link pinned for ifname (0: none).
func (l *pinLab) linkID(t *testing.T, ifname string) link.ID {
	t.Helper()
	lk, err := link.LoadPinnedLink(fmt.Sprintf("%s/links/%s", l.dir, ifname), nil)
	if err != nil {
		return 0
	}
	defer lk.Close()
	info, err := lk.Info()
	if err != nil {
		t.Fatal(err)
	}
	return info.ID
}

// attach attaches dp to ifname in the lab.
func (l *pinLab) attach(t *testing.T, dp *dataplane.Dataplane, ifname string) *dataplane.Attachment {
	t.Helper()
	var a *dataplane.Attachment
	if err := l.e.Do(func() (err error) { a, err = dp.Attach(ifname, dataplane.ModeAuto); return err }); err != nil {
		t.Fatal(err)
	}
	return a
}

// watchXDP polls ifname until stop is closed and reports every moment it
// had no XDP program: a replacement in place never leaves one.
func (l *pinLab) watchXDP(t *testing.T, ifname string) (stop func() int) {
	t.Helper()
	done, gaps := make(chan struct{}), make(chan int, 1)
	go func() {
		n := 0
		for {
			select {
			case <-done:
				gaps <- n
				return
			default:
			}
			if id, err := xdpProgID(l.e, ifname); err != nil || id == 0 {
				n++
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return func() int { close(done); return <-gaps }
}
