package e2e

import (
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/status/api"
	"github.com/xlbproject/xlb/test/lab"
)

// featureOf returns the named feature of a status document.
func featureOf(t *testing.T, d api.Document, name string) api.Feature {
	t.Helper()
	for _, f := range d.Dataplane.Features {
		if f.Name == name {
			return f
		}
	}
	t.Fatalf("status lists no feature %q: %+v", name, d.Dataplane.Features)
	return api.Feature{}
}

// waitStatus polls the status API until ok accepts a document.
func waitStatus(t *testing.T, l *lab.Lab, what string, ok func(api.Document) bool) api.Document {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		d := statusDoc(t, l)
		if ok(d) {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never showed %s; last: dataplane %+v connections %+v maintenance %+v", what, d.Dataplane, d.Connections, d.Maintenance)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The daemon starts with each optional kernel feature turned off in turn
// (XLB_DISABLE_FEATURES, as if the host refused it), balances real
// connections, cleans up after them, shows the fallback in status and
// stops cleanly.
func TestFeatureFallbacks(t *testing.T) {
	l := lab.New(t, lab.Options{Topology: lab.OneArm})
	cases := []struct {
		disable string
		want    map[string]string // feature -> path
		via     string
		events  string // close event path
	}{
		{"", map[string]string{"ring_buffer": "ring_buffer", "batch_map_ops": "batch_lookup", "xdp_bpf_link": "bpf_link"}, "bpf_link", "ring_buffer"},
		{"bpf_for_each_map_elem", map[string]string{"bpf_for_each_map_elem": "not_used"}, "bpf_link", "ring_buffer"},
		{"ring_buffer", map[string]string{"ring_buffer": "per_cpu_queue"}, "bpf_link", "per_cpu_queue"},
		{"batch_map_ops", map[string]string{"batch_map_ops": "per_key"}, "bpf_link", "ring_buffer"},
		{"xdp_bpf_link", map[string]string{"xdp_bpf_link": "netlink"}, "netlink", "ring_buffer"},
		{"bpf_for_each_map_elem,ring_buffer,batch_map_ops,xdp_bpf_link",
			map[string]string{"ring_buffer": "per_cpu_queue", "batch_map_ops": "per_key", "xdp_bpf_link": "netlink"}, "netlink", "per_cpu_queue"},
	}
	for i, c := range cases {
		name := c.disable
		if name == "" {
			name = "none"
		}
		t.Run(name, func(t *testing.T) {
			l.ResetStats()
			p, err := startXLBEnv(t, l, labConfig(l, ""), []string{"XLB_DISABLE_FEATURES=" + c.disable})
			if err != nil {
				t.Fatal(err)
			}
			if err := p.WaitLog("xlb running", 60*time.Second); err != nil {
				t.Fatal(err)
			}
			if err := p.WaitLog("kernel features probed", time.Second); err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(11, uint64(i)))
			const conns = 30
			for j := range conns {
				if err := echoThrough(l.Client(), rng, 1+rng.IntN(4096)); err != nil {
					t.Fatalf("connection %d: %v", j, err)
				}
			}
			waitCompleted(t, l, conns)
			// Every closed connection shows up in time-wait, and the
			// maintenance loop read its close event on the chosen path
			// and walked the flow map on the chosen path.
			d := waitStatus(t, l, "30 pairs in time-wait, their close events read, a walk pass", func(d api.Document) bool {
				ev, w := d.Maintenance.CloseEvents, d.Maintenance.Walk
				return d.Connections.TimeWait == conns && d.Dataplane.FlowMap.Entries == 2*conns &&
					ev.ReadTotal >= conns && ev.TimeWaitScheduled == conns && w.PassesTotal > 0 && w.LastPassEntries == 2*conns
			})
			if ev := d.Maintenance.CloseEvents; ev.Path != c.events || ev.LostTotal != 0 {
				t.Errorf("close events %+v, want path %s and none lost", ev, c.events)
			}
			for _, off := range strings.Split(c.disable, ",") {
				if off == "" {
					continue
				}
				if f := featureOf(t, d, off); f.State != "disabled" || f.Detail == "" {
					t.Errorf("%s: %+v, want disabled with a reason", off, f)
				}
			}
			for name, path := range c.want {
				if f := featureOf(t, d, name); f.Path != path {
					t.Errorf("%s: path %q, want %q (%+v)", name, f.Path, path, f)
				}
			}
			if len(d.Dataplane.XDPAttachments) != 1 || d.Dataplane.XDPAttachments[0].Via != c.via {
				t.Errorf("attachments %+v, want eth0 via %s", d.Dataplane.XDPAttachments, c.via)
			}
			stopXLB(t, l, p)
		})
	}
}

// A program attached through netlink outlives a SIGKILL, as a bpf_link
// does through its pin. The next start, with XDP links allowed again,
// finds it in the host settings journal and replaces it in place through
// netlink (a link cannot replace it atomically, and detaching first would
// drop packets), adopts the pinned maps with the connection that lived
// through the crash, and balances; its clean stop leaves no program
// behind.
func TestNetlinkAttachSurvivesCrash(t *testing.T) {
	l := lab.New(t, lab.Options{Topology: lab.OneArm})
	p, err := startXLBEnv(t, l, labConfig(l, ""), []string{"XLB_DISABLE_FEATURES=xdp_bpf_link"})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitLog("xlb running", 60*time.Second); err != nil {
		t.Fatal(err)
	}
	lived := establish(t, l)
	p.Kill()
	if mode, err := l.XLB.XDPAttachMode("eth0"); err != nil || mode == 0 {
		t.Fatalf("after SIGKILL: XDP mode %d (%v), want the netlink-attached program still there", mode, err)
	}

	p = startXLB(t, l, labConfig(l, ""))
	for _, line := range []string{"did not undo its host settings", "adopted 1 connection pairs", "replaced_in_place=true via=netlink"} {
		if err := p.WaitLog(line, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if d := statusDoc(t, l); len(d.Dataplane.XDPAttachments) != 1 || d.Dataplane.XDPAttachments[0].Via != "netlink" {
		t.Errorf("attachments %+v, want eth0 via netlink", d.Dataplane.XDPAttachments)
	}
	if err := roundTrip(lived.(*net.TCPConn), []byte("still here")); err != nil {
		t.Fatalf("the connection established before the crash: %v", err)
	}
	rng := rand.New(rand.NewPCG(5, 7))
	for j := range 10 {
		if err := echoThrough(l.Client(), rng, 100); err != nil {
			t.Fatalf("connection %d: %v", j, err)
		}
	}
	stopXLB(t, l, p)
}
