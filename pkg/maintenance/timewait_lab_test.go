package maintenance_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xlbproject/xlb/internal/testnet"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
	"github.com/xlbproject/xlb/pkg/maintenance"
)

// What SNATHold is for, with the kernel's own sockets: a TCP server that
// closes first keeps a TIME_WAIT socket, which Linux asks to expire 60 s
// later (TCP_TIMEWAIT_LEN) and which its timer wheel removes up to one
// granule of the wheel's level later (5.12 s at HZ=100, 2.048 s at
// HZ=250, 4.096 s at HZ=1000). A port handed back to that server exactly
// 60 s after the close can meet the socket; SNATHold waits it out.
//
// Four connections in a namespace of their own close at intervals of a
// quarter granule, so their expiries fall at four points a quarter
// granule apart on the wheel's boundaries and one of them outlives its
// 60 s by at least three quarters of a granule, whatever the phase. The
// test polls the server's TIME_WAIT sockets in /proc/net/tcp (their
// timer's remaining time, 10 ms units) and asserts what the constant
// relies on: each socket was asked to expire 60 s after its close, none
// outlived that by more than one granule at this host's HZ, one outlived
// it by at least half a granule (a 60 s hold would have been too short),
// and each was gone within SNATHold of its close. About 65 s at HZ=250.
func TestBackendTimeWaitOutlivesSixtySeconds(t *testing.T) {
	testnet.RequireRoot(t)
	e := dt.NewEnv(t, dt.Options{}) // only for the kernel's HZ, measured as the data path does
	hz, err := e.DP.HZ()
	if err != nil {
		t.Fatal(err)
	}
	tick := time.Second / time.Duration(hz)
	granule := time.Duration(maintenance.WheelGranule(uint64(maintenance.TimeWait/time.Second)*uint64(hz))) * tick
	if granule > maintenance.TimerWheelSlack {
		t.Fatalf("HZ=%d: granule %v beyond the slack %v", hz, granule, maintenance.TimerWheelSlack)
	}

	ns, err := testnet.NewAnon()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	const conns = 4
	var socks [conns]twSocket
	err = testnet.In(ns, func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(lo); err != nil {
			return err
		}
		return watchTimeWait(socks[:], granule/conns, maintenance.SNATHold+5*time.Second)
	})
	if err != nil {
		t.Fatal(err)
	}

	var most time.Duration
	for i, s := range socks {
		requested := s.expiry - s.closed
		outlived := s.lastPresent - s.expiry // a lower bound: it was there then
		goneWithin := s.goneBy - s.closed    // an upper bound: it was gone then
		t.Logf("socket %d (port %d): asked to expire %v after the close, still there %v after that, gone within %v of the close (HZ=%d, granule %v)",
			i, s.port, requested, outlived, goneWithin, hz, granule)
		// 10 ms resolution of the timer read, and the time the close
		// takes to reach the server
		if requested < maintenance.TimeWait-20*time.Millisecond || requested > maintenance.TimeWait+time.Second {
			t.Errorf("socket %d: asked to expire %v after the close, want the 60 s TIME_WAIT", i, requested)
		}
		if outlived > granule+2*tick {
			t.Errorf("socket %d: outlived its expiry by %v, more than a granule (%v) and the softirq's tick", i, outlived, granule)
		}
		if goneWithin >= maintenance.SNATHold {
			t.Errorf("socket %d: still there %v after the close, SNATHold is %v", i, goneWithin, maintenance.SNATHold)
		}
		most = max(most, outlived)
	}
	if most < granule/2 {
		t.Errorf("no socket outlived its 60 s by half a granule (%v): at most %v", granule/2, most)
	}
}

// twSocket is one server socket's TIME_WAIT as the poll saw it, in time
// since the watch began.
type twSocket struct {
	port        uint16        // the client's port (the server's peer)
	closed      time.Duration // before the server's close
	expiry      time.Duration // the timer's expiry, an upper bound
	lastPresent time.Duration // before the last read that listed it
	goneBy      time.Duration // after the first read that no longer did
}

// twAppearLimit bounds the wait for a closed server socket to show in
// TIME_WAIT (the client's FIN reaching it): generous, since a loaded host
// may not run the poll for seconds; it only turns a hang into an error.
const twAppearLimit = 30 * time.Second

// watchTimeWait runs a server on 127.0.0.1 in the calling thread's
// namespace, opens len(socks) connections to it, closes them server first
// at intervals of every, and polls /proc/thread-self/net/tcp until every
// server socket has left TIME_WAIT (or limit after the first close).
func watchTimeWait(socks []twSocket, every, limit time.Duration) error {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	srvPort := uint16(ln.Addr().(*net.TCPAddr).Port)
	type conn struct{ client, server net.Conn }
	cs := make([]conn, len(socks))
	for i := range cs {
		c, err := net.Dial("tcp4", ln.Addr().String())
		if err != nil {
			return err
		}
		s, err := ln.Accept()
		if err != nil {
			c.Close()
			return err
		}
		cs[i] = conn{c, s}
		socks[i].port = uint16(c.LocalAddr().(*net.TCPAddr).Port)
		defer c.Close()
		defer s.Close()
	}

	start := time.Now()
	since := func() time.Duration { return time.Since(start) }
	const unknown = time.Duration(1 << 62)
	for i := range socks {
		socks[i].expiry, socks[i].goneBy = unknown, unknown
	}
	closedN, goneN := 0, 0
	for goneN < len(socks) {
		if closedN < len(socks) && since() >= time.Duration(closedN)*every {
			// server first, then the client's FIN: the server's socket
			// enters TIME_WAIT
			i := closedN
			socks[i].closed = since()
			if err := cs[i].server.Close(); err != nil {
				return err
			}
			cs[i].client.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.Copy(io.Discard, cs[i].client); err != nil {
				return fmt.Errorf("client %d: waiting for the server's FIN: %w", i, err)
			}
			if err := cs[i].client.Close(); err != nil {
				return err
			}
			closedN++
		}
		if closedN > 0 && since()-socks[0].closed > limit {
			return fmt.Errorf("TIME_WAIT sockets still there %v after the first close: %+v", limit, socks)
		}
		before := since()
		tw, err := readTimeWait(srvPort)
		if err != nil {
			return err
		}
		after := since()
		for i := range socks[:closedN] {
			s := &socks[i]
			if s.goneBy != unknown {
				continue
			}
			left, ok := tw[s.port]
			switch {
			case ok:
				s.lastPresent = before
				if left > 0 { // 0 once expired: no bound on the expiry
					s.expiry = min(s.expiry, after+left+10*time.Millisecond)
				}
			case s.expiry != unknown: // seen in TIME_WAIT before: gone now
				s.goneBy = after
				goneN++
			case since()-s.closed > twAppearLimit:
				return fmt.Errorf("server socket of client port %d not seen in TIME_WAIT within %v of its close", s.port, twAppearLimit)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// readTimeWait lists the TIME_WAIT sockets of local port port in this
// thread's namespace (/proc/net/tcp): remote port and the time left on
// the socket's timer (its "tm->when", in USER_HZ units of 10 ms; 0 once
// the expiry has passed).
func readTimeWait(port uint16) (map[uint16]time.Duration, error) {
	b, err := os.ReadFile("/proc/thread-self/net/tcp")
	if err != nil {
		return nil, err
	}
	out := map[uint16]time.Duration{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Scan() // header
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[3] != "06" { // TCP_TIME_WAIT
			continue
		}
		lp, err1 := hexPort(f[1])
		rp, err2 := hexPort(f[2])
		tr, when, ok := strings.Cut(f[5], ":")
		if err := errors.Join(err1, err2); err != nil || !ok || tr != "03" {
			return nil, fmt.Errorf("/proc/net/tcp line %q: %v", sc.Text(), err)
		}
		if lp != port {
			continue
		}
		left, err := strconv.ParseUint(when, 16, 64)
		if err != nil {
			return nil, fmt.Errorf("/proc/net/tcp line %q: %w", sc.Text(), err)
		}
		out[rp] = time.Duration(left) * 10 * time.Millisecond
	}
	return out, sc.Err()
}

// hexPort is the port of an "ADDR:PORT" field of /proc/net/tcp.
func hexPort(f string) (uint16, error) {
	_, p, ok := strings.Cut(f, ":")
	if !ok {
		return 0, fmt.Errorf("no port in %q", f)
	}
	v, err := strconv.ParseUint(p, 16, 16)
	return uint16(v), err
}
