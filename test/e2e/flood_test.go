package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"testing"
	"time"

	"github.com/xlbproject/xlb/internal/testnet/loadgen"
	"github.com/xlbproject/xlb/test/lab"
)

// Flood test sizes: a small table and a short embryonic TTL, so that a
// paced hping3 floods more than 10 x the table per embryonic TTL (issue
// 13) without taking both cores.
const (
	floodTable        = 512                   // flow_table.max_connections
	floodTTL          = 2                     // flow_table.embryonic_ttl_secs
	floodHeld         = 100                   // established connections kept busy through the flood
	floodFor          = 10 * time.Second      // how long the flood lasts: 5 embryonic TTLs
	floodInterval     = 20 * time.Microsecond // hping3 -i u20: about 10,000 SYNs/s here
	floodRecoverLimit = floodTTL*time.Second + 2*time.Second
)

// A SYN flood with random sources fills the table with pairs whose
// handshake never completes. The 100 established connections keep
// exchanging data through it and none is lost (an established pair is
// never displaced), and once the flood stops new connections succeed
// again within the embryonic TTL + 2 s (the embryonic pairs are removed
// embryonic_ttl_secs after their SYN, whatever they saw meanwhile).
func TestCapacitySYNFlood(t *testing.T) {
	if _, err := exec.LookPath("hping3"); err != nil {
		t.Fatalf("hping3 not found (Debian package hping3; `make deps` installs it): %v", err)
	}
	l := newTupleLab(t)
	c := capacity{addrs: 1, portLo: 40000, portHi: 59999, maxConnections: floodTable, embryonicTTL: floodTTL}
	p := startXLB(t, l.Lab, withCapacity(t, l.Lab, "", c))
	held := holdConnections(t, l.Client(), floodHeld, 200*time.Millisecond)

	f, err := loadgen.StartSYNFlood(l.Client(), "eth0", churnVIP, floodInterval)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Stop() })
	time.Sleep(floodFor)
	if gone, out := f.Exited(); gone {
		t.Fatalf("hping3 ended before it was stopped:\n%s", out)
	}
	st, err := f.Stop()
	if err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	need := 10 * float64(floodTable) / floodTTL
	t.Logf("flood: %d SYNs with random sources in %v, %.0f/s (10 x the table per embryonic TTL is %.0f/s)",
		st.Packets, st.Elapsed.Round(time.Millisecond), st.Rate(), need)
	if st.Rate() <= need {
		t.Fatalf("the flood sent %.0f SYNs/s, not more than 10 x %d pairs per %d s (%.0f/s): the test proves nothing", st.Rate(), floodTable, floodTTL, need)
	}
	held.check(t, "during the flood")

	took, err := recoveredAfter(l.Lab, stopped, 20, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("new connections succeed from %v after the flood stopped on (limit: embryonic TTL %d s + 2 s)", took.Round(time.Millisecond), floodTTL)
	rounds := held.finish(t)
	t.Logf("%d held connections: %d round trips, none failed", floodHeld, rounds)
	expired, _ := waitCounter(t, l.Lab, "xlb_connections_embryonic_expired_total", nil, 30*time.Second, func(v float64) bool { return v > 0 })
	t.Logf("daemon: xlb_connections_embryonic_expired_total %v", expired)
	if expired == 0 {
		t.Fatal("xlb_connections_embryonic_expired_total is 0 after the flood")
	}
	if took > floodRecoverLimit {
		t.Fatalf("new connections succeeded only %v after the flood ended, want within %v (embryonic TTL + 2 s)", took, floodRecoverLimit)
	}
	stopXLB(t, l.Lab, p)
}

// recoveredAfter polls new connections to listenAddr, one after the
// other, each bounded by 250 ms (so a dropped SYN is not waited for),
// until need of them in a row succeeded, and returns how long after since
// the first of that streak succeeded: from then on new connections
// succeed. An error once timeout has passed since since.
func recoveredAfter(l *lab.Lab, since time.Time, need int, timeout time.Duration) (time.Duration, error) {
	var last error
	var streakStart time.Time
	streak := 0
	for time.Since(since) < timeout {
		if last = echoOnce(l, 250*time.Millisecond); last != nil {
			streak = 0
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if streak == 0 {
			streakStart = time.Now()
		}
		if streak++; streak == need {
			return streakStart.Sub(since), nil
		}
	}
	return 0, fmt.Errorf("%d new connections in a row did not succeed within %v of the flood's end; last failure: %v", need, timeout, last)
}

// echoOnce opens one connection through XLB to a tupleEcho backend,
// reads the tuple line, does a round trip and closes, all within timeout.
func echoOnce(l *lab.Lab, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := l.Client().DialFrom(ctx, 0, listenAddr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := readLine(c); err != nil {
		return fmt.Errorf("tuple line: %w", err)
	}
	msg := []byte("after the flood")
	if _, err := c.Write(msg); err != nil {
		return err
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return err
	}
	if string(got) != string(msg) {
		return errors.New("echo differs")
	}
	return nil
}
