package loadgen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
)

// SYNFlood is a running hping3 (Debian's package hping3) that sends TCP
// SYNs with random source addresses (--rand-source) from a host's
// namespace. The sources are spoofed, so nothing ever completes a
// handshake: every SYN that creates state in a balancer leaves an
// embryonic entry behind (issue 13, "Half-open pairs outlive a flood").
type SYNFlood struct {
	cmd   *exec.Cmd
	out   bytes.Buffer
	start time.Time
	done  chan struct{} // closed when hping3 exited
	err   error         // its exit, once done is closed

	stopOnce sync.Once
	stats    FloodStats
	stopErr  error
}

// FloodStats is what a flood sent.
type FloodStats struct {
	Packets uint64        // hping3's count of packets transmitted
	Elapsed time.Duration // from start until hping3 was told to stop
}

// Rate is packets per second.
func (s FloodStats) Rate() float64 { return float64(s.Packets) / s.Elapsed.Seconds() }

// StartSYNFlood starts hping3 in h's namespace, sending out of ifname to
// target. interval is the pause between packets (hping3 -i uN, at
// microsecond resolution; hping3's own pacing makes the real rate lower
// than 1/interval: read FloodStats); 0 sends as fast as hping3 can
// (--flood). Stop it with Stop before the namespace is removed (the
// process keeps the namespace alive).
func StartSYNFlood(h *testnet.Host, ifname string, target netip.AddrPort, interval time.Duration) (*SYNFlood, error) {
	args := []string{"-q", "-S", "--rand-source", "-I", ifname, "-p", strconv.Itoa(int(target.Port()))}
	if interval > 0 {
		args = append(args, "-i", "u"+strconv.FormatInt(max(1, interval.Microseconds()), 10))
	} else {
		args = append(args, "--flood")
	}
	args = append(args, target.Addr().String())
	f := &SYNFlood{cmd: h.Command(context.Background(), "hping3", args...), done: make(chan struct{})}
	f.cmd.Stdout, f.cmd.Stderr = &f.out, &f.out
	f.start = time.Now()
	if err := f.cmd.Start(); err != nil {
		return nil, fmt.Errorf("loadgen: start hping3 (Debian package hping3) in %s: %w", h.NS, err)
	}
	go func() {
		f.err = f.cmd.Wait()
		close(f.done)
	}()
	return f, nil
}

// Exited reports whether hping3 ended on its own (it should not before
// Stop; its output then says why).
func (f *SYNFlood) Exited() (bool, string) {
	select {
	case <-f.done:
		return true, f.out.String()
	default:
		return false, ""
	}
}

// transmitted is hping3's closing statistic.
var transmitted = regexp.MustCompile(`(\d+) packets transmitted`)

// Stop ends the flood with SIGINT (hping3 then prints its statistics),
// or SIGKILL if it is still there 10 s later, and returns what it sent.
// It is idempotent and safe to call from a cleanup.
func (f *SYNFlood) Stop() (FloodStats, error) {
	f.stopOnce.Do(func() {
		f.stats.Elapsed = time.Since(f.start)
		_ = f.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-f.done:
		case <-time.After(10 * time.Second):
			_ = f.cmd.Process.Kill()
			<-f.done
			f.stopErr = errors.New("loadgen: hping3 ignored SIGINT for 10 s; killed")
			return
		}
		m := transmitted.FindSubmatch(f.out.Bytes())
		if m == nil {
			f.stopErr = fmt.Errorf("loadgen: hping3 (%v) printed no statistics:\n%s", f.err, f.out.String())
			return
		}
		f.stats.Packets, _ = strconv.ParseUint(string(m[1]), 10, 64)
	})
	return f.stats, f.stopErr
}
