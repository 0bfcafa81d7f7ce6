package dataplane_test

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/google/gopacket/layers"

	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// addOnes adds v to the 16-bit big-endian word at b[0:2] in one's complement.
func addOnes(b []byte, v uint16) {
	s := uint32(binary.BigEndian.Uint16(b)) + uint32(v)
	s = s&0xffff + s>>16
	binary.BigEndian.PutUint16(b, uint16(s))
}

type sweepStats struct{ frames, zeroTCP, zeroIP int }

// TestChecksumSweep rewrites more than 100,000 frames over random tuples,
// TTLs, IDs, sequence numbers, options and payloads in both directions; every
// output must equal the frame gopacket builds for the expected rewrite
// (canonical checksums) and verify independently. Every 50th frame is
// steered so that its rewritten TCP or IPv4 checksum is exactly 0x0000, the
// value an incorrectly folded incremental update gets wrong.
func TestChecksumSweep(t *testing.T) {
	const pairs, perDir = 1500, 35
	seed := uint64(20261130)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	e := dt.NewEnv(t, dt.Options{MaxConnections: 4096, SNATPortLo: 40000, SNATPortHi: 49999})
	var st sweepStats
	err := e.Do(func() error {
		seen := map[netip.AddrPort]bool{}
		nextPort := make([]uint16, len(e.Backends))
		for i := 0; i < pairs; i++ {
			var c netip.AddrPort
			for {
				host := byte(1 + rng.IntN(254))
				if host == 10 {
					continue
				}
				c = netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, host}), uint16(1024+rng.IntN(64511)))
				if !seen[c] {
					seen[c] = true
					break
				}
			}
			local, remote := uint16(80), uint16(8080)
			if rng.IntN(2) == 1 {
				local, remote = 443, 8443
			}
			bi := i % len(e.Backends)
			backend := netip.AddrPortFrom(e.Backends[bi], remote)
			snat := 40000 + nextPort[bi]
			nextPort[bi]++

			syn := randomize(rng, e.FromClient(c, local, dt.SYN, rng.Uint32(), 0, nil), false)
			if err := st.check(e, syn, e.Front, e.ToBackend(syn, backend, snat), false); err != nil {
				return fmt.Errorf("pair %d SYN: %w", i, err)
			}
			for j := 0; j < perDir; j++ {
				force := (st.frames%50 == 0)
				in := randomize(rng, e.FromClient(c, local, dt.ACK|dt.PSH, rng.Uint32(), rng.Uint32(), nil), true)
				if err := st.check(e, in, e.Front, e.ToBackend(in, backend, snat), force); err != nil {
					return fmt.Errorf("pair %d client frame %d: %w", i, j, err)
				}
				force = (st.frames%50 == 0)
				back := randomize(rng, e.FromBackend(backend, snat, dt.ACK, rng.Uint32(), rng.Uint32(), nil), true)
				if err := st.check(e, back, e.BackendIface(), e.ToClient(back, c, local), force); err != nil {
					return fmt.Errorf("pair %d backend frame %d: %w", i, j, err)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	if st.frames < 100000 || st.zeroTCP == 0 || st.zeroIP == 0 {
		t.Fatalf("sweep too small: %+v", st)
	}
	t.Logf("checked %d rewritten frames (%d with TCP checksum 0x0000, %d with IPv4 checksum 0x0000)", st.frames, st.zeroTCP, st.zeroIP)
}

// randomize fills a segment's TTL, ID, window, flags, options and payload.
func randomize(rng *rand.Rand, s dt.Segment, data bool) dt.Segment {
	s.TTL = uint8(2 + rng.IntN(254))
	s.ID = uint16(rng.Uint32())
	s.Window = uint16(rng.Uint32())
	if rng.IntN(3) == 0 {
		s.Options = []layers.TCPOption{{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: []byte{byte(rng.Uint32()), byte(rng.Uint32())}}}
	}
	if data {
		n := 2 + rng.IntN(300)
		s.Payload = make([]byte, n)
		for i := range s.Payload {
			s.Payload[i] = byte(rng.Uint32())
		}
	}
	return s
}

// check runs in through the program and compares with want. With force, the
// payload and IP ID are adjusted first so the expected output checksums are
// 0x0000.
func (st *sweepStats) check(e *dt.Env, in dt.Segment, ifc dt.Iface, want dt.Segment, force bool) error {
	if force && len(in.Payload) >= 2 {
		exp := want.Frame()
		tcpOff := 14 + 20
		c := binary.BigEndian.Uint16(exp[tcpOff+16:])
		in.Payload = append([]byte(nil), in.Payload...)
		addOnes(in.Payload, c)
		want.Payload = in.Payload
		ipc := binary.BigEndian.Uint16(exp[14+10:])
		var id [2]byte
		binary.BigEndian.PutUint16(id[:], in.ID)
		addOnes(id[:], ipc)
		in.ID = binary.BigEndian.Uint16(id[:])
		want.ID = in.ID
	}
	act, out, err := e.RunHere(in.Frame(), ifc)
	if err != nil {
		return err
	}
	if act != dt.XDPTX {
		return fmt.Errorf("action %s, want XDP_TX", dt.ActionName(act))
	}
	if d := dt.Diff(out, want.Frame()); d != "" {
		return fmt.Errorf("output differs:\n%s", d)
	}
	if err := dt.VerifyChecksums(out); err != nil {
		return err
	}
	st.frames++
	if binary.BigEndian.Uint16(out[14+20+16:]) == 0 {
		st.zeroTCP++
	}
	if binary.BigEndian.Uint16(out[14+10:]) == 0 {
		st.zeroIP++
	}
	return nil
}
