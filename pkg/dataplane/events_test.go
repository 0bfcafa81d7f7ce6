package dataplane_test

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// Close events (bpf/layout.h struct close_event): the packet that makes a
// pair terminal — the second FIN or the first RST — posts exactly one event
// naming the pair's forward key, generation, kind, backend and the moment
// it became terminal (the forward entry's frozen last_seen). Nothing else
// closes: not a half close, not a retransmission, not a RST after both
// FINs. The same stream carries a CloseOpen event for every new pair (its
// forward key at its SYN's time) and a CloseHold event for the reverse
// entry a SYN leaves held when it replaces a pair whose backend closed
// first. The ring buffer and its fallback, the per-CPU queues, deliver the
// same events.

// closePath is one way close events reach userspace.
type closePath struct {
	name string
	opts dt.Options
	path string
}

var closePaths = []closePath{
	{name: "ring_buffer", path: dataplane.PathRingBuffer},
	{name: "per_cpu_queue", opts: dt.Options{Disable: []dataplane.Feature{dataplane.FeatureRingBuf}}, path: dataplane.PathPerCPUQueue},
}

// newPathEnv builds an environment for path p, skipping when the host
// refuses the ring buffer the path needs.
func newPathEnv(t *testing.T, p closePath, o dt.Options) *dt.Env {
	t.Helper()
	o.Disable = append(o.Disable, p.opts.Disable...)
	e := dt.NewEnv(t, o)
	if st := e.DP.Features().Get(dataplane.FeatureRingBuf); p.path == dataplane.PathRingBuffer && st.State != dataplane.StateAvailable {
		t.Skipf("ring buffer not available here: %s", st)
	}
	return e
}

// openEvents starts reading close events and checks the path taken.
func openEvents(t *testing.T, e *dt.Env, path string) *dataplane.CloseEvents {
	t.Helper()
	ev, err := e.DP.OpenCloseEvents()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ev.Close() })
	if ev.Path() != path {
		t.Fatalf("close events through %s, want %s", ev.Path(), path)
	}
	return ev
}

// drain returns the events posted since the previous drain (copies: the
// reader reuses its buffers) and fails the test if any was overwritten.
func drain(t *testing.T, ev *dataplane.CloseEvents) []dataplane.CloseEvent {
	t.Helper()
	var out []dataplane.CloseEvent
	read, over, err := ev.Drain(func(c *dataplane.CloseEvent) { out = append(out, *c) })
	if err != nil {
		t.Fatal(err)
	}
	if over != 0 {
		t.Fatalf("%d close events overwritten", over)
	}
	if read != uint64(len(out)) {
		t.Fatalf("Drain reported %d events and delivered %d", read, len(out))
	}
	return out
}

// conn is one connection through the fixture: a client to listen:80, with
// its pair as the handshake left it, and where each side's sequence
// numbers stand, so that every FIN and RST it sends lies in its receiver's
// window (bpf/track.h).
type conn struct {
	e *dt.Env
	c netip.AddrPort
	p dt.Pair
	// synAt is the forward entry's last_seen right after the SYN: the
	// SYN's time, which the pair's CloseOpen event carries.
	synAt uint32
	// cNext and bNext are the next sequence number of the client and of
	// the backend; cFIN and bFIN whether that side has sent its FIN.
	cNext, bNext uint32
	cFIN, bFIN   bool
}

// open runs the handshake of client port port (ISNs 1000 and 5000): the
// SYN, the backend's SYN-ACK, the client's ACK.
func open(t *testing.T, e *dt.Env, port uint16) *conn {
	t.Helper()
	k := &conn{e: e, c: dt.Client(port)}
	k.dial(t, 1000, 5000)
	return k
}

// dial sends the client's SYN of sequence isnC, reads the pair it created
// and completes the handshake with a SYN-ACK of sequence isnB.
func (k *conn) dial(t *testing.T, isnC, isnB uint32) {
	t.Helper()
	s := synFrom(k.e, k.c, 80)
	s.Seq = isnC
	k.e.MustRun(t, s.Frame(), k.e.Front, dt.XDPTX)
	k.p = k.e.MustPair(t, k.c, 80)
	k.synAt = k.p.Fwd.LastSeen
	k.cNext, k.bNext, k.cFIN, k.bFIN = isnC+1, isnB, false, false
	k.backend(t, dt.SYN|dt.ACK)
	k.bNext++
	k.client(t, dt.ACK)
	k.p = k.now(t)
}

// client sends a segment from the client through the pair: at its next
// sequence number (a FIN sent again: at its FIN's), acknowledging all the
// backend sent.
func (k *conn) client(t *testing.T, flags uint8) {
	t.Helper()
	seq := segSeq(flags, &k.cNext, &k.cFIN)
	k.e.MustRun(t, k.e.FromClient(k.c, 80, flags, seq, ackOf(flags, k.bNext), nil).Frame(), k.e.Front, dt.XDPTX)
}

// backend sends a segment from the backend through the pair, numbered as
// client does.
func (k *conn) backend(t *testing.T, flags uint8) {
	t.Helper()
	seq := segSeq(flags, &k.bNext, &k.bFIN)
	k.e.MustRun(t, k.e.FromBackend(k.p.Backend(), k.p.SNATPort(), flags, seq, ackOf(flags, k.cNext), nil).Frame(), k.e.BackendIface(), dt.XDPTX)
}

// segSeq is the sequence number of a segment of flags from a side whose
// next sequence number is *next and that has sent its FIN (*fin): a first
// FIN takes one number, a FIN sent again repeats its own.
func segSeq(flags uint8, next *uint32, fin *bool) uint32 {
	switch {
	case flags&dt.FIN == 0:
		return *next
	case *fin:
		return *next - 1
	}
	*fin = true
	*next++
	return *next - 1
}

// ackOf is the acknowledgement number of a segment of flags: ack with ACK
// set, else 0.
func ackOf(flags uint8, ack uint32) uint32 {
	if flags&dt.ACK == 0 {
		return 0
	}
	return ack
}

// finish closes the pair with both FINs, the client's first.
func (k *conn) finish(t *testing.T) {
	t.Helper()
	k.client(t, dt.FIN|dt.ACK)
	k.backend(t, dt.FIN|dt.ACK)
}

// reset closes the pair with a client RST.
func (k *conn) reset(t *testing.T) {
	t.Helper()
	k.client(t, dt.RST|dt.ACK)
}

// now reads the pair as the map holds it now.
func (k *conn) now(t *testing.T) dt.Pair {
	t.Helper()
	return k.e.MustPair(t, k.c, 80)
}

func (k *conn) id() int { return int(k.p.Fwd.BackendId) }

// closeRecord is a close event without its time, which differs between runs.
type closeRecord struct {
	Key        dataplane.FlowKey
	Generation uint32
	Kind       dataplane.CloseKind
	BackendID  uint16
}

func (r closeRecord) String() string {
	return fmt.Sprintf("%s %v gen %d backend %d", r.Kind, r.Key, r.Generation, r.BackendID)
}

// sameRecords reports whether a and b hold the same records, in any order.
func sameRecords(a, b []closeRecord) bool {
	sorted := func(rs []closeRecord) []string {
		out := make([]string, len(rs))
		for i, r := range rs {
			out[i] = r.String()
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(sorted(a), sorted(b))
}

// posted is an event a test expects: its record and its time.
type posted struct {
	closeRecord
	Time uint32
}

// recordOf is the record of event c.
func recordOf(c dataplane.CloseEvent) closeRecord {
	return closeRecord{Key: c.Key, Generation: c.Generation, Kind: dataplane.CloseKind(c.Kind), BackendID: c.BackendId}
}

// closedEvent is the event that ended k's current pair with kind: its forward
// key, stamped with the forward entry's last_seen (the terminal moment).
func closedEvent(t *testing.T, k *conn, kind dataplane.CloseKind) posted {
	t.Helper()
	p := k.now(t)
	return posted{closeRecord{p.FwdKey, p.Fwd.Generation, kind, p.Fwd.BackendId}, p.Fwd.LastSeen}
}

// openedEvent is the CloseOpen event of k's pair: its forward key at its SYN's time.
func openedEvent(k *conn) posted {
	return posted{closeRecord{k.p.FwdKey, k.p.Fwd.Generation, dataplane.CloseOpen, k.p.Fwd.BackendId}, k.synAt}
}

// heldEvent is the CloseHold event of pair p, replaced while its backend held
// TIME_WAIT: its reverse key, at the moment p became terminal.
func heldEvent(p dt.Pair) posted {
	return posted{closeRecord{p.RevKey, p.Rev.Generation, dataplane.CloseHold, p.Rev.BackendId}, p.Fwd.LastSeen}
}

// wantEvents drains and checks that exactly the events want were posted,
// in any order (the per-CPU queues keep the order of one CPU's events
// only), each with a zero pad and a time not after the clock. It returns
// their records in want's order.
func wantEvents(t *testing.T, e *dt.Env, ev *dataplane.CloseEvents, want ...posted) []closeRecord {
	t.Helper()
	got := drain(t, ev)
	if len(got) != len(want) {
		t.Fatalf("%d close events %+v, want %v", len(got), got, want)
	}
	now := e.Now(t)
	taken := make([]bool, len(got))
	var out []closeRecord
	for _, w := range want {
		i := -1
		for j, c := range got {
			if !taken[j] && recordOf(c) == w.closeRecord {
				i = j
				break
			}
		}
		if i < 0 {
			t.Fatalf("close events %+v, want %v among them", got, w.closeRecord)
		}
		taken[i] = true
		c := got[i]
		if c.Time != w.Time || c.Pad != 0 {
			t.Fatalf("close event %v: time %d pad %d, want time %d and pad 0", w.closeRecord, c.Time, c.Pad, w.Time)
		}
		if dataplane.Widen(now, c.Time) > now {
			t.Fatalf("close event %v: time %d is after the clock %d", w.closeRecord, c.Time, now)
		}
		out = append(out, w.closeRecord)
	}
	return out
}

// wantClose drains and checks that exactly one event was posted, for k's
// current pair, of kind, stamped with the forward entry's last_seen.
func wantClose(t *testing.T, ev *dataplane.CloseEvents, k *conn, kind dataplane.CloseKind) closeRecord {
	t.Helper()
	return wantEvents(t, k.e, ev, closedEvent(t, k, kind))[0]
}

// wantOpen drains and checks that exactly k's CloseOpen event was posted.
func wantOpen(t *testing.T, ev *dataplane.CloseEvents, k *conn) closeRecord {
	t.Helper()
	return wantEvents(t, k.e, ev, openedEvent(k))[0]
}

// wantNoClose drains and checks that nothing was posted.
func wantNoClose(t *testing.T, ev *dataplane.CloseEvents, what string) {
	t.Helper()
	if got := drain(t, ev); len(got) != 0 {
		t.Fatalf("%s posted %d close events: %+v", what, len(got), got)
	}
}

// closeScenario runs every kind of close on e and returns the events it
// expected and got, in order.
func closeScenario(t *testing.T, e *dt.Env, ev *dataplane.CloseEvents) []closeRecord {
	var out []closeRecord
	// Every new pair posts CloseOpen at its SYN; the handshake posts nothing.
	openSeen := func(port uint16) *conn {
		t.Helper()
		k := open(t, e, port)
		out = append(out, wantOpen(t, ev, k))
		return k
	}

	// Both FINs, the client's first: the backend's FIN posts CloseFIN
	// (through the reverse entry, naming the forward key).
	a := openSeen(33000)
	a.client(t, dt.FIN|dt.ACK)
	wantNoClose(t, ev, "a half close by the client")
	a.backend(t, dt.ACK|dt.PSH)
	wantNoClose(t, ev, "data after a half close")
	a.backend(t, dt.FIN|dt.ACK)
	out = append(out, wantClose(t, ev, a, dataplane.CloseFIN))
	a.client(t, dt.FIN|dt.ACK)
	a.backend(t, dt.FIN|dt.ACK)
	a.client(t, dt.ACK)
	wantNoClose(t, ev, "retransmitted FINs and the final ACK")
	a.backend(t, dt.RST)
	wantNoClose(t, ev, "a RST after both FINs")
	if f := a.now(t).Fwd.Flags; f&dataplane.FlagClosedRST != 0 || f&dataplane.FlagClosedFIN == 0 {
		t.Fatalf("flags %#x after a RST on a time-wait pair, want CLOSED_FIN only", f)
	}

	// Both FINs, the backend's first: the client's FIN posts it.
	b := openSeen(33001)
	b.backend(t, dt.FIN|dt.ACK)
	b.backend(t, dt.FIN|dt.ACK)
	wantNoClose(t, ev, "a half close by the backend, retransmitted")
	b.client(t, dt.FIN|dt.ACK)
	out = append(out, wantClose(t, ev, b, dataplane.CloseFIN))

	// A client RST, retransmitted, answered by a backend RST: one event.
	c := openSeen(33002)
	c.client(t, dt.RST|dt.ACK)
	out = append(out, wantClose(t, ev, c, dataplane.CloseRST))
	c.client(t, dt.RST|dt.ACK)
	c.backend(t, dt.RST)
	c.client(t, dt.FIN|dt.ACK)
	wantNoClose(t, ev, "RSTs and a FIN after a RST")

	// A backend RST after the client's FIN: through the reverse entry.
	d := openSeen(33003)
	d.client(t, dt.FIN|dt.ACK)
	d.backend(t, dt.RST)
	out = append(out, wantClose(t, ev, d, dataplane.CloseRST))
	d.backend(t, dt.RST)
	wantNoClose(t, ev, "a retransmitted backend RST")

	// A half-closed pair stays open however long it carries data.
	h := openSeen(33004)
	h.backend(t, dt.FIN|dt.ACK)
	h.client(t, dt.ACK|dt.PSH)
	h.backend(t, dt.FIN|dt.ACK)
	h.client(t, dt.ACK|dt.PSH)
	wantNoClose(t, ev, "a half-closed pair")

	// A new connection replacing a time-wait pair the client closed first
	// posts only its own CloseOpen; its close carries the new generation.
	old := a.p
	a.dial(t, 90000, 70000)
	out = append(out, wantOpen(t, ev, a))
	if a.p.Fwd.Generation == old.Fwd.Generation {
		t.Fatalf("replacement kept generation %d", old.Fwd.Generation)
	}
	a.reset(t)
	out = append(out, wantClose(t, ev, a, dataplane.CloseRST))

	// One replacing a pair the backend closed first leaves its reverse
	// entry held: CloseHold for it at the old close, then the CloseOpen.
	oldB := b.now(t)
	b.dial(t, 90000, 70000)
	out = append(out, wantEvents(t, e, ev, heldEvent(oldB), openedEvent(b))...)

	if c := e.Counters(t); c.CloseEventsLost != 0 {
		t.Fatalf("%d close events lost", c.CloseEventsLost)
	}
	return out
}

func TestCloseEvents(t *testing.T) {
	got := map[string][]closeRecord{}
	for _, p := range closePaths {
		t.Run(p.name, func(t *testing.T) {
			e := newPathEnv(t, p, dt.Options{})
			got[p.name] = closeScenario(t, e, openEvents(t, e, p.path))
		})
	}
	ring, queue := got[closePaths[0].name], got[closePaths[1].name]
	if ring == nil || queue == nil {
		return // a path was skipped or failed
	}
	if fmt.Sprint(ring) != fmt.Sprint(queue) {
		t.Fatalf("the paths disagree:\nring buffer:   %v\nper-CPU queue: %v", ring, queue)
	}
}

// Events posted before the reader opens are still delivered, once.
func TestCloseEventsBeforeOpen(t *testing.T) {
	for _, p := range closePaths {
		t.Run(p.name, func(t *testing.T) {
			e := newPathEnv(t, p, dt.Options{})
			a := open(t, e, 33000)
			a.finish(t)
			ev := openEvents(t, e, p.path)
			wantEvents(t, e, ev, openedEvent(a), closedEvent(t, a, dataplane.CloseFIN))
			wantNoClose(t, ev, "a second drain")
		})
	}
}

// More events than a per-CPU queue holds between two drains: the ring
// buffer delivers them all; the queue delivers the newest CloseQueueSlots
// in order and reports the rest as overwritten. Each of n connection
// attempts posts two, its CloseOpen and its CloseRST. They run on one CPU
// (the test thread is pinned) so they all land in one queue.
func TestCloseEventsFlood(t *testing.T) {
	const extra = 100
	const n = (dataplane.CloseQueueSlots + extra) / 2
	for _, p := range closePaths {
		t.Run(p.name, func(t *testing.T) {
			e := newPathEnv(t, p, dt.Options{})
			ev := openEvents(t, e, p.path)
			k := dt.ForwardKey(cli, 80)
			var allowed unix.CPUSet
			if err := unix.SchedGetaffinity(0, &allowed); err != nil {
				t.Fatal(err)
			}
			cpu := 0
			for !allowed.IsSet(cpu) {
				cpu++
			}
			// One tuple, over and over: a SYN replaces the reset pair, and
			// the client gives up on it at once (a RST of its SYN's
			// sequence + 1, the only one an embryonic pair takes).
			err := onCPU(e, cpu, func() error {
				for i := range n {
					syn := synFrom(e, cli, 80)
					syn.Seq = uint32(i)
					if act, _, err := e.RunHere(syn.Frame(), e.Front); err != nil || act != dt.XDPTX {
						return fmt.Errorf("SYN %d: %s %v", i, dt.ActionName(act), err)
					}
					if act, _, err := e.RunHere(e.FromClient(cli, 80, dt.RST, uint32(i)+1, 0, nil).Frame(), e.Front); err != nil || act != dt.XDPTX {
						return fmt.Errorf("RST %d: %s %v", i, dt.ActionName(act), err)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			var got []dataplane.CloseEvent
			read, over, err := ev.Drain(func(c *dataplane.CloseEvent) { got = append(got, *c) })
			if err != nil {
				t.Fatal(err)
			}
			wantRead, wantOver := uint64(2*n), uint64(0)
			if p.path == dataplane.PathPerCPUQueue {
				wantRead, wantOver = dataplane.CloseQueueSlots, extra
			}
			if read != wantRead || over != wantOver || len(got) != int(read) {
				t.Fatalf("read %d (delivered %d), overwritten %d; want %d and %d", read, len(got), over, wantRead, wantOver)
			}
			// Every pair got the next generation: the events are the
			// newest ones, oldest first, its CloseOpen and its CloseRST
			// for each pair.
			last := e.MustPair(t, cli, 80).Fwd.Generation
			for i, c := range got {
				back := uint32(len(got) - 1 - i)
				want, kind := last-back/2, dataplane.CloseRST
				if back%2 == 1 {
					kind = dataplane.CloseOpen
				}
				if c.Generation != want || c.Key != k || dataplane.CloseKind(c.Kind) != kind {
					t.Fatalf("event %d of %d: %s %v gen %d, want %s %v gen %d", i, len(got), dataplane.CloseKind(c.Kind), c.Key, c.Generation, kind, k, want)
				}
			}
			if c := e.Counters(t); c.CloseEventsLost != 0 || c.PairsReplaced != n-1 {
				t.Fatalf("lost %d, replaced %d; want 0 and %d", c.CloseEventsLost, c.PairsReplaced, n-1)
			}
			wantNoClose(t, ev, "a second drain")
		})
	}
}

// onCPU runs fn inside the fixture namespace on a thread pinned to cpu.
func onCPU(e *dt.Env, cpu int, fn func() error) error {
	return e.Do(func() error {
		var orig, one unix.CPUSet
		if err := unix.SchedGetaffinity(0, &orig); err != nil {
			return err
		}
		one.Set(cpu)
		if err := unix.SchedSetaffinity(0, &one); err != nil {
			return err
		}
		defer unix.SchedSetaffinity(0, &orig)
		return fn()
	})
}

// The per-CPU queues: events on two CPUs are all delivered, once, each
// CPU's in the order they happened; a reader opened later still gets them.
// Each connection attempt posts its CloseOpen, then its CloseRST.
func TestCloseQueueAcrossCPUs(t *testing.T) {
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		t.Fatal(err)
	}
	var cpus []int
	for i := 0; i < 1024 && len(cpus) < 2; i++ {
		if allowed.IsSet(i) {
			cpus = append(cpus, i)
		}
	}
	if len(cpus) < 2 {
		t.Skip("needs two CPUs")
	}
	p := closePaths[1]
	e := newPathEnv(t, p, dt.Options{})
	ev := openEvents(t, e, p.path)
	// client ports closed on each CPU, in order
	plan := []struct {
		cpu   int
		ports []uint16
	}{{cpus[0], []uint16{33000, 33001, 33002, 33003, 33004}}, {cpus[1], []uint16{33005, 33006, 33007}}, {cpus[0], []uint16{33008, 33009}}}
	byCPU := map[int][]dataplane.FlowKey{}
	for _, step := range plan {
		err := onCPU(e, step.cpu, func() error {
			for _, port := range step.ports {
				c := dt.Client(port)
				if act, _, err := e.RunHere(synFrom(e, c, 80).Frame(), e.Front); err != nil || act != dt.XDPTX {
					return fmt.Errorf("SYN %d: %s %v", port, dt.ActionName(act), err)
				}
				if act, _, err := e.RunHere(e.FromClient(c, 80, dt.RST, 1001, 0, nil).Frame(), e.Front); err != nil || act != dt.XDPTX {
					return fmt.Errorf("RST %d: %s %v", port, dt.ActionName(act), err)
				}
				byCPU[step.cpu] = append(byCPU[step.cpu], dt.ForwardKey(c, 80))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	type event struct {
		key  dataplane.FlowKey
		kind dataplane.CloseKind
	}
	check := func(got []dataplane.CloseEvent) {
		t.Helper()
		if len(got) != 20 {
			t.Fatalf("%d events, want 20: %+v", len(got), got)
		}
		pos := map[event]int{}
		for i, c := range got {
			ek := event{c.Key, dataplane.CloseKind(c.Kind)}
			if _, dup := pos[ek]; dup {
				t.Fatalf("%s %v delivered twice", ek.kind, ek.key)
			}
			pos[ek] = i
			if p := e.MustPair(t, c.Key.Src(), 80); c.Generation != p.Fwd.Generation || (ek.kind != dataplane.CloseRST && ek.kind != dataplane.CloseOpen) {
				t.Fatalf("event %+v for pair %+v", c, p.Fwd)
			}
		}
		for cpu, keys := range byCPU {
			var order []event
			for _, k := range keys {
				order = append(order, event{k, dataplane.CloseOpen}, event{k, dataplane.CloseRST})
			}
			for i := 1; i < len(order); i++ {
				a, aok := pos[order[i-1]]
				b, bok := pos[order[i]]
				if !aok || !bok || a > b {
					t.Fatalf("CPU %d: %s %v (at %d, %v) and %s %v (at %d, %v) out of order or missing", cpu,
						order[i-1].kind, order[i-1].key, a, aok, order[i].kind, order[i].key, b, bok)
				}
			}
		}
	}
	check(drain(t, ev))
	wantNoClose(t, ev, "a second drain")
	check(drain(t, openEvents(t, e, p.path)))
}

// closeCounts is the part of BackendStats the close path keeps.
type closeCounts struct {
	Opened, ClosedFIN, ClosedRST, ReplacedFIN, ReplacedRST uint64
	ClosedFINByBackend, ClosedRSTByBackend                 uint64
}

func closeCountsOf(t *testing.T, e *dt.Env) []closeCounts {
	t.Helper()
	all, err := e.DP.AllBackendStats()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != int(dataplane.MaxBackends) {
		t.Fatalf("%d backend stats, want %d", len(all), dataplane.MaxBackends)
	}
	out := make([]closeCounts, len(all))
	for i, s := range all {
		out[i] = closeCounts{s.Opened, s.ClosedFIN, s.ClosedRST, s.ReplacedFIN, s.ReplacedRST, s.ClosedFINByBackend, s.ClosedRSTByBackend}
	}
	return out
}

// wantCloseCounts checks every backend's counts against want (absent: zero).
func wantCloseCounts(t *testing.T, e *dt.Env, want map[int]closeCounts) {
	t.Helper()
	for id, got := range closeCountsOf(t, e) {
		if got != want[id] {
			t.Fatalf("backend %d: %+v, want %+v", id, got, want[id])
		}
	}
}

// Per-backend close counts: each pair counts once, when it becomes
// terminal, under its backend (member), its kind and its initiator (the
// backend's first FIN or its RST also count as the backend's: DESIGN §9,
// a service's closures by initiator); a SYN replacing a terminal pair
// counts under the old pair's backend and kind. Both batch and per-key reads.
func TestBackendCloseCounts(t *testing.T) {
	for _, disable := range [][]dataplane.Feature{nil, {dataplane.FeatureBatchOps}} {
		t.Run(fmt.Sprintf("disable=%v", disable), func(t *testing.T) {
			e := dt.NewEnv(t, dt.Options{Disable: disable})
			wantCloseCounts(t, e, nil)
			// round robin: backends 0, 1, 2, 0, 1, ...
			a, b, c := open(t, e, 33000), open(t, e, 33001), open(t, e, 33002)
			if a.id() != 0 || b.id() != 1 || c.id() != 2 {
				t.Fatalf("backends %d %d %d, want 0 1 2", a.id(), b.id(), c.id())
			}
			want := map[int]closeCounts{0: {Opened: 1}, 1: {Opened: 1}, 2: {Opened: 1}}
			wantCloseCounts(t, e, want)

			a.finish(t)
			a.client(t, dt.FIN|dt.ACK)
			a.backend(t, dt.FIN|dt.ACK)
			a.client(t, dt.RST|dt.ACK) // stays CLOSED_FIN
			want[0] = closeCounts{Opened: 1, ClosedFIN: 1}
			wantCloseCounts(t, e, want)

			b.backend(t, dt.RST)
			b.backend(t, dt.RST)
			b.client(t, dt.RST|dt.ACK)
			want[1] = closeCounts{Opened: 1, ClosedRST: 1, ClosedRSTByBackend: 1}
			wantCloseCounts(t, e, want)

			c.client(t, dt.FIN|dt.ACK) // half close: nothing
			wantCloseCounts(t, e, want)

			// New connections on a's and b's tuples replace their
			// pairs (the new pairs go to backends 0 and 1); a SYN on c's
			// half-closed pair is taken as a retransmission.
			a.dial(t, 90000, 70000)
			b.dial(t, 90000, 70000)
			e.MustRun(t, synFrom(e, c.c, 80).Frame(), e.Front, dt.XDPTX)
			want[0] = closeCounts{Opened: 2, ClosedFIN: 1, ReplacedFIN: 1}
			want[1] = closeCounts{Opened: 2, ClosedRST: 1, ReplacedRST: 1, ClosedRSTByBackend: 1}
			wantCloseCounts(t, e, want)
			if n := e.Counters(t); n.PairsReplaced != 2 || n.SYNReused != 1 {
				t.Fatalf("replaced %d reused %d, want 2 and 1", n.PairsReplaced, n.SYNReused)
			}

			// The replacement on backend 0 closes by RST, backend 2 finishes.
			a.reset(t)
			c.backend(t, dt.FIN|dt.ACK)
			want[0] = closeCounts{Opened: 2, ClosedFIN: 1, ClosedRST: 1, ReplacedFIN: 1}
			want[2] = closeCounts{Opened: 1, ClosedFIN: 1}
			wantCloseCounts(t, e, want)
			// A replacement of a replacement counts again.
			e.MustRun(t, synFrom(e, a.c, 80).Frame(), e.Front, dt.XDPTX)
			want[0] = closeCounts{Opened: 2, ClosedFIN: 1, ClosedRST: 1, ReplacedFIN: 1, ReplacedRST: 1}
			want[2] = closeCounts{Opened: 2, ClosedFIN: 1} // round robin: the sixth pair
			wantCloseCounts(t, e, want)

			// The seventh pair (backend 0) ends with the backend's FIN first.
			x := open(t, e, 33003)
			if x.id() != 0 {
				t.Fatalf("the seventh pair's backend %d, want 0", x.id())
			}
			x.backend(t, dt.FIN|dt.ACK)
			x.client(t, dt.FIN|dt.ACK)
			want[0] = closeCounts{Opened: 3, ClosedFIN: 2, ClosedRST: 1, ReplacedFIN: 1, ReplacedRST: 1, ClosedFINByBackend: 1}
			wantCloseCounts(t, e, want)
		})
	}
}

// age moves an entry's last-seen time ticks into the past.
func age(t *testing.T, e *dt.Env, k dataplane.FlowKey, ticks uint32) {
	t.Helper()
	v := e.DeleteFlow(t, k)
	v.LastSeen -= ticks
	if err := e.DP.PutFlow(k, v); err != nil {
		t.Fatal(err)
	}
}

// A packet on an entry idle for LoneCheckTicks checks the entry's
// counterpart: a lone entry (counterpart missing or of another pair) is
// reported with its own key and generation, and the packet is forwarded
// as usual. An intact idle pair, or a lone entry that is not idle, reports
// nothing.
func TestLoneSightings(t *testing.T) {
	for _, p := range closePaths {
		t.Run(p.name, func(t *testing.T) {
			e := newPathEnv(t, p, dt.Options{})
			ev := openEvents(t, e, p.path)
			idle := uint32(dataplane.LoneCheckTicks)

			openSeen := func(port uint16) *conn {
				t.Helper()
				k := open(t, e, port)
				wantOpen(t, ev, k)
				return k
			}

			intact, busy, noRev, noFwd := openSeen(33000), openSeen(33001), openSeen(33002), openSeen(33003)
			age(t, e, intact.p.FwdKey, idle)
			age(t, e, intact.p.RevKey, idle)
			intact.client(t, dt.ACK)
			intact.backend(t, dt.ACK)

			// lone, but not idle
			e.DeleteFlow(t, busy.p.RevKey)
			busy.client(t, dt.ACK)
			if got := drain(t, ev); len(got) != 0 {
				t.Fatalf("events %v, want none", got)
			}

			e.DeleteFlow(t, noRev.p.RevKey)
			age(t, e, noRev.p.FwdKey, idle)
			noRev.client(t, dt.ACK)
			e.DeleteFlow(t, noFwd.p.FwdKey)
			age(t, e, noFwd.p.RevKey, idle)
			noFwd.backend(t, dt.ACK)
			got := drain(t, ev)
			want := []closeRecord{
				{noRev.p.FwdKey, noRev.p.Fwd.Generation, dataplane.CloseLone, noRev.p.Fwd.BackendId},
				{noFwd.p.RevKey, noFwd.p.Rev.Generation, dataplane.CloseLone, noFwd.p.Rev.BackendId},
			}
			if len(got) != len(want) {
				t.Fatalf("events %v, want %v", got, want)
			}
			for i, g := range got {
				if r := (closeRecord{g.Key, g.Generation, dataplane.CloseKind(g.Kind), g.BackendId}); r != want[i] {
					t.Fatalf("event %d: %v, want %v", i, r, want[i])
				}
			}
			// The check ran once per idle spell: the next packet is not idle.
			noRev.client(t, dt.ACK)
			if got := drain(t, ev); len(got) != 0 {
				t.Fatalf("events %v after a packet that was not idle, want none", got)
			}
		})
	}
}
