package dataplane_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// Handshake latency fixtures (issue 14 "passive handshake latency";
// bpf/handshake.h): the SYN that creates a pair stamps its forward entry,
// the backend's first SYN-ACK adds the time since to the backend's
// histogram, once. The data path's clock (bpf_ktime_get_ns) cannot be set
// from a test, so each check bounds what the data path measured by what
// the test saw of the same clock around it (CLOCK_MONOTONIC), and checks
// the bucket the data path chose against HandshakeBuckets for the
// duration it summed: the sum of a lone handshake is its duration.

// monoUs is the data path's handshake clock as the test reads it:
// CLOCK_MONOTONIC in microseconds, low 32 bits, never 0 (bpf/clock.h
// now_us32).
func monoUs(t *testing.T) uint32 {
	t.Helper()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	if us := uint32(ts.Nano() / 1000); us != 0 {
		return us
	}
	return 1
}

// histograms reads every backend id's handshake histogram.
func histograms(t *testing.T, e *dt.Env) []dataplane.Histogram {
	t.Helper()
	h, err := e.DP.HandshakeHistograms()
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != int(dataplane.MaxBackends) {
		t.Fatalf("%d histograms, want one per backend id (%d)", len(h), dataplane.MaxBackends)
	}
	return h
}

// minusHist is what a histogram gained from before to after.
func minusHist(after, before dataplane.Histogram) dataplane.Histogram {
	d := dataplane.Histogram{Count: after.Count - before.Count, Sum: after.Sum - before.Sum}
	for k := range d.Buckets {
		d.Buckets[k] = after.Buckets[k] - before.Buckets[k]
	}
	return d
}

// bucketOf is the bucket of HandshakeBuckets a handshake of d belongs in.
func bucketOf(d time.Duration) int {
	for k, b := range dataplane.HandshakeBuckets {
		if d.Microseconds() <= int64(math.Round(b*1e6)) {
			return k
		}
	}
	return len(dataplane.HandshakeBuckets)
}

// wantOneHandshake checks that h holds exactly one handshake, of at least
// lo and at most hi, in the bucket its duration belongs in.
func wantOneHandshake(t *testing.T, what string, h dataplane.Histogram, lo, hi time.Duration) {
	t.Helper()
	var n uint64
	for _, c := range h.Buckets {
		n += c
	}
	if h.Count != 1 || n != 1 {
		t.Fatalf("%s: %d handshakes (buckets %v), want 1", what, h.Count, h.Buckets)
	}
	if h.Sum < lo || h.Sum > hi {
		t.Fatalf("%s: took %s, want %s..%s", what, h.Sum, lo, hi)
	}
	if k := bucketOf(h.Sum); h.Buckets[k] != 1 {
		t.Fatalf("%s: %s counted in buckets %v, want bucket %d (bounds %v s)", what, h.Sum, h.Buckets, k, dataplane.HandshakeBuckets)
	}
}

// wantNoHandshakes checks that no backend id has a handshake.
func wantNoHandshakes(t *testing.T, e *dt.Env, what string) {
	t.Helper()
	for id, h := range histograms(t, e) {
		if h != (dataplane.Histogram{}) {
			t.Fatalf("%s: backend %d has handshakes %+v, want none", what, id, h)
		}
	}
}

// setSynUs rewrites the SYN time of the forward entry under fk.
func setSynUs(t *testing.T, e *dt.Env, fk dataplane.FlowKey, us uint32) {
	t.Helper()
	v := e.DeleteFlow(t, fk)
	v.SynUs = us
	if err := e.DP.PutFlow(fk, v); err != nil {
		t.Fatal(err)
	}
}

// synAck is the backend's SYN-ACK of the connection.
func (k *tcpConn) synAck() dt.Segment {
	s := k.backend(dt.SYN|dt.ACK, isnB, isnC+1, synAckWindow, nil)
	s.Options = synAckOptions(6)
	return s
}

// The backend's first SYN-ACK counts the time since the SYN, once, in the
// backend's histogram; a retransmitted SYN-ACK, the client's ACK and data
// count nothing.
func TestHandshakeCounted(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	start := time.Now()
	k := dial(t, e, 33000, synOptions(7))
	if k.p.Fwd.SynUs == 0 || k.p.Rev.SynUs != 0 {
		t.Fatalf("syn_us %d/%d after the SYN, want the SYN's time on the forward entry only", k.p.Fwd.SynUs, k.p.Rev.SynUs)
	}
	wantNoHandshakes(t, e, "after the SYN")
	const wait = 3 * time.Millisecond
	time.Sleep(wait)
	k.forward("SYN-ACK", k.synAck(), counted{})
	took := time.Since(start)
	all := histograms(t, e)
	wantOneHandshake(t, "after the SYN-ACK", all[k.id()], wait-time.Microsecond, took+time.Microsecond)
	for id, h := range all {
		if id != k.id() && h != (dataplane.Histogram{}) {
			t.Fatalf("backend %d (not the pair's %d) has handshakes %+v", id, k.id(), h)
		}
	}

	k.forward("retransmitted SYN-ACK", k.synAck(), counted{})
	k.forward("client ACK", k.client(dt.ACK, isnC+1, isnB+1, 1000, nil), counted{})
	k.forward("client data", k.client(dt.ACK|dt.PSH, isnC+1, isnB+1, 1000, []byte("hello")), counted{})
	if h := histograms(t, e)[k.id()]; h != all[k.id()] {
		t.Fatalf("histogram %+v after a retransmitted SYN-ACK and the client's ACK and data, want it unchanged %+v", h, all[k.id()])
	}
}

// A retransmitted SYN keeps the first SYN's time: the handshake measures
// how long the backend took to accept, retransmissions included.
func TestHandshakeRetransmittedSYNKeepsTheFirstTime(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	start := time.Now()
	k := dial(t, e, 33000, synOptions(7))
	const wait = 20 * time.Millisecond
	time.Sleep(wait)
	syn := k.client(dt.SYN, isnC, 0, synWindow, nil)
	syn.Options = synOptions(7)
	k.forward("retransmitted SYN", syn, counted{SYNReused: 1})
	if got := k.now().Fwd.SynUs; got != k.p.Fwd.SynUs {
		t.Fatalf("syn_us %d after the retransmitted SYN, want the first SYN's %d", got, k.p.Fwd.SynUs)
	}
	k.forward("SYN-ACK", k.synAck(), counted{})
	wantOneHandshake(t, "after the SYN-ACK", histograms(t, e)[k.id()], wait-time.Microsecond, time.Since(start)+time.Microsecond)
}

// A pair whose SYN was not timed (syn_us 0: migrated from layout 3, whose
// data path did not stamp SYNs) completes its handshake uncounted.
func TestHandshakeNotTimedIsNotCounted(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	k := dial(t, e, 33000, synOptions(7))
	setSynUs(t, e, k.p.FwdKey, 0)
	k.forward("SYN-ACK", k.synAck(), counted{})
	k.wantFlags(dataplane.FlagSYNACK, 0)
	wantNoHandshakes(t, e, "after the SYN-ACK of an untimed pair")
}

// Handshakes across the whole range land in the bucket their duration
// belongs in, the ones beyond the last bound in the last bucket: each
// pair's SYN time is set back by the duration before its SYN-ACK.
func TestHandshakeBucketChoice(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	for i, ago := range []time.Duration{0, 70 * time.Microsecond, 2 * time.Millisecond, 150 * time.Millisecond,
		1200 * time.Millisecond, 2999 * time.Millisecond, 5 * time.Second, time.Hour} {
		k := dial(t, e, uint16(33000+i), synOptions(7))
		before := histograms(t, e)[k.id()]
		start := time.Now()
		syn := monoUs(t) - uint32(ago.Microseconds())
		if syn == 0 {
			syn = 1
		}
		setSynUs(t, e, k.p.FwdKey, syn)
		k.forward("SYN-ACK", k.synAck(), counted{})
		d := minusHist(histograms(t, e)[k.id()], before)
		wantOneHandshake(t, fmt.Sprintf("a SYN %s ago", ago), d, ago-time.Microsecond, ago+time.Since(start)+time.Microsecond)
		if ago > 3*time.Second && d.Buckets[dataplane.HandshakeBounds] != 1 {
			t.Fatalf("a SYN %s ago: buckets %v, want the last (above %g s)", ago, d.Buckets, dataplane.HandshakeBuckets[dataplane.HandshakeBounds-1])
		}
	}
}
