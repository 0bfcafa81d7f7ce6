package floor_test

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/google/gopacket/layers"

	"github.com/xlbproject/xlb/internal/testnet"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// TestBalancerChecksumSweep: 20,000 frames per SNAT shape over random client
// ports, TTLs, IDs, windows, sequence numbers, MSS options and payloads, both
// directions; every output must equal the frame gopacket builds for the
// expected rewrite (canonical checksums). Every 25th frame is steered so
// that its rewritten TCP or IPv4 checksum is exactly 0x0000, the value an
// incorrectly folded incremental update gets wrong.
func TestBalancerChecksumSweep(t *testing.T) {
	const frames = 20000
	for _, snat := range []netip.Addr{dt.ListenIP, testnet.XLBExtraIP(0)} {
		t.Run("snat="+snat.String(), func(t *testing.T) {
			f := newLB(t, snat)
			seed := uint64(20261202)
			rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
			var zeroTCP, zeroIP int
			for i := 0; i < frames; i++ {
				cport := uint16(1024 + rng.IntN(64511))
				var in, want dt.Segment
				if i%2 == 0 {
					in = sweepRandom(rng, f.fromClient(cport, dt.ACK|dt.PSH, rng.Uint32(), rng.Uint32(), nil))
					want = f.toBackend(in)
				} else {
					in = sweepRandom(rng, f.fromBackend(cport, dt.ACK|dt.PSH, rng.Uint32(), rng.Uint32(), nil))
					want = f.toClient(in)
				}
				if i%25 == 0 {
					steerToZero(&in, &want)
				}
				out := f.expectTX(t, "sweep frame", in, want)
				if binary.BigEndian.Uint16(out[14+20+16:]) == 0 {
					zeroTCP++
				}
				if binary.BigEndian.Uint16(out[14+10:]) == 0 {
					zeroIP++
				}
			}
			if zeroTCP == 0 || zeroIP == 0 {
				t.Fatalf("no output with a 0x0000 checksum (TCP %d, IPv4 %d)", zeroTCP, zeroIP)
			}
		})
	}
}

// sweepRandom fills a segment's TTL, ID, window, options and payload.
func sweepRandom(rng *rand.Rand, s dt.Segment) dt.Segment {
	s.TTL = uint8(2 + rng.IntN(254))
	s.ID = uint16(rng.Uint32())
	s.Window = uint16(rng.Uint32())
	if rng.IntN(3) == 0 {
		s.Options = []layers.TCPOption{{OptionType: layers.TCPOptionKindMSS, OptionLength: 4,
			OptionData: []byte{byte(rng.Uint32()), byte(rng.Uint32())}}}
	}
	s.Payload = make([]byte, 2+rng.IntN(300))
	for i := range s.Payload {
		s.Payload[i] = byte(rng.Uint32())
	}
	return s
}

// steerToZero adds the expected output's TCP checksum to the first payload
// word and its IPv4 checksum to the IP ID, in and want alike, so that both
// expected checksums become 0x0000 (one's complement: raising the data by
// the checksum's value cancels it).
func steerToZero(in, want *dt.Segment) {
	exp := want.Frame()
	in.Payload = append([]byte(nil), in.Payload...)
	addOnes(in.Payload, binary.BigEndian.Uint16(exp[14+20+16:]))
	want.Payload = in.Payload
	var id [2]byte
	binary.BigEndian.PutUint16(id[:], in.ID)
	addOnes(id[:], binary.BigEndian.Uint16(exp[14+10:]))
	in.ID = binary.BigEndian.Uint16(id[:])
	want.ID = in.ID
}

// addOnes adds v to the big-endian word at b[0:2] in one's complement.
func addOnes(b []byte, v uint16) {
	s := uint32(binary.BigEndian.Uint16(b)) + uint32(v)
	binary.BigEndian.PutUint16(b, uint16(s&0xffff+s>>16))
}
